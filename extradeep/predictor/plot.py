"""One figure for `extradeep predict --plot`: the critical-path breakdown and the what-if step times."""

from __future__ import annotations

from extradeep.columns import MEASURED, PHASE, PREDICTED
from extradeep.predictor.critical_path import CLASSES

COLORS = {
    "compute": "#4C72B0",
    "communication": "#DD8452",
    "memory": "#55A868",
    "cpu_overhead": "#C44E52",
    "idle": "#BBBBBB",
}


def plot_prediction(pred, path) -> None:
    """Left: seconds per class on each step's critical path. Right: predicted step time per scenario."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    b = pred.breakdown.reset_index(drop=True)
    bottom = [0.0] * len(b)
    for c in CLASSES:
        left.bar(range(len(b)), b[c] * 1e3, bottom=[v * 1e3 for v in bottom], color=COLORS[c], label=c)
        bottom = [x + y for x, y in zip(bottom, b[c])]
    left.set_xlabel("step")
    left.set_ylabel("critical path (ms)")
    left.set_title("Where the step time goes")
    left.legend(fontsize=8)
    s = pred.summary
    labels = [f"{sc}\n[{ph}]" for sc, ph in zip(s["scenario"], s[PHASE])]
    right.barh(range(len(s)), s[PREDICTED] * 1e3, color="#4C72B0", label="replayed / predicted")
    right.scatter(s[MEASURED] * 1e3, range(len(s)), color="black", marker="|", s=200, label="measured")
    right.set_yticks(range(len(s)), labels, fontsize=7)
    right.invert_yaxis()
    right.set_xlabel("step time (ms), median over steps")
    right.set_title("What-if")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
