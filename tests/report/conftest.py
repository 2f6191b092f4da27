"""A small simulated experiment, analysed once per session, for the report tests; and a check that
a figure's tick labels are readable."""

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg


@pytest.fixture(scope="session")
def small_analysis(tmp_path_factory):
    from extradeep import load_experiment
    from extradeep.aggregate.experiment import Dataset
    from extradeep.analysis.core import analyse
    from extradeep.simulate import simulate

    root = tmp_path_factory.mktemp("report-sim")
    simulate(root / "runs", params={"ranks": [2, 4, 6, 8, 10]}, repetitions=2, train_steps=3, val_steps=1, seed=3)
    experiment = load_experiment([root / "runs"], params=["ranks"], cache_dir=root / "cache", progress=False)
    return analyse(experiment, Dataset(train_samples=50_000, val_samples=10_000, batch_per_rank=64))


@pytest.fixture(scope="session")
def overlapping_tick_labels():
    """overlapping_tick_labels(fig) -> the texts of the first two tick labels of one axis that
    overlap when the figure is drawn (labels run into each other), or None."""

    def check(fig):
        canvas = FigureCanvasAgg(fig)  # the report's figures come without a canvas (no pyplot)
        canvas.draw()
        renderer = canvas.get_renderer()
        for ax in fig.axes:
            for axis in (ax.xaxis, ax.yaxis):
                labels = [t for t in axis.get_ticklabels(which="both") if t.get_visible() and t.get_text()]
                boxes = [t.get_window_extent(renderer) for t in labels]
                for i, a in enumerate(boxes):
                    for j in range(i + 1, len(boxes)):
                        if a.overlaps(boxes[j]):
                            return labels[i].get_text(), labels[j].get_text()
        return None

    return check
