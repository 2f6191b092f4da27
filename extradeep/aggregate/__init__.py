"""From per-step sums to an Experiment: medians over steps, ranks and repetitions, and the Experiment itself."""
