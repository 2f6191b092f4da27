"""Which form of the step the observations support: how collectives cross nodes, and whether ZeRO
0-1's gradient reduction overlaps the last backward pass.

Both are choices of structure, not coefficients: the two collective algorithms of
:data:`~extradeep.layouts.parts.COLLECTIVE_ALGORITHMS`, and :data:`GRAD_OVERLAPS` ('none': the
reduction starts after the backward pass, as Megatron-LM and DeepSpeed do by default; 'buckets': it
starts as gradient buckets fill, as PyTorch's DDP and Megatron's ``--overlap-grad-reduce`` do). The
model fits every combination of the choices left to 'select' that the observations can tell apart
and keeps the one with the lower robust loss; a choice nothing observed can tell stays at its default
('hierarchical', 'none': the cautious side for the overlap) and is reported as assumed, and the
interval then reaches the other forms' predictions too. The collective algorithm is selected by
default. The overlap is read, by default ('auto'), from what launched the gradient reductions of
the profiled ZeRO 0-1 runs with data parallelism: the autograd thread (during the backward pass) or
the main thread (after it); without such a run it is 'none', assumed. Selecting it by the better
fit ('select') proved unreliable on simulated studies: the measured waits hold the ranks' skew
(docs/analysis.md).
"""

from __future__ import annotations

from itertools import product

import numpy as np
import pandas as pd

from extradeep.columns import DP, VALUE, ZERO
from extradeep.errors import InputError
from extradeep.layouts.parts import COLLECTIVE_ALGORITHMS, nominal_features

GRAD_OVERLAPS = ("none", "buckets")
DEFAULTS = {"algorithm": "hierarchical", "grad_overlap": "none"}
CHOICES = {"algorithm": COLLECTIVE_ALGORITHMS, "grad_overlap": GRAD_OVERLAPS}
OPTIONS = {"algorithm": "collective_algorithm", "grad_overlap": "grad_overlap"}  # the model's parameter of each


def check_forms(model) -> None:
    """A user error (one line) for an unknown choice of either form."""
    for form, option in OPTIONS.items():
        choice = getattr(model, option)
        known = ("select", *(("auto",) if form == "grad_overlap" else ()), *CHOICES[form])
        if choice not in known:
            raise InputError(None, f"unknown {choice!r}; one of {', '.join(known)}", field=option)


def choose_forms(
    model, steps: pd.DataFrame, part_rows: pd.DataFrame, shares: pd.DataFrame | None = None
) -> tuple[dict, dict, np.ndarray | None]:
    """(the chosen form per choice, whether each was measured or given, the coefficients when choosing
    needed a fit, else None). ``shares``: the per-part observations' in_backward rows, which 'auto'
    reads the gradient reduction's form from."""
    observable = {
        "algorithm": crossing_observed(model.hardware_, steps, part_rows),
        "grad_overlap": overlap_observed(steps, part_rows),
    }
    candidates, measured = {}, {}
    for form, option in OPTIONS.items():
        choice = getattr(model, option)
        if choice == "auto":  # what the traces show, else the default, assumed
            seen = launched_in_backward(shares)
            candidates[form], measured[form] = (seen or DEFAULTS[form],), seen is not None
        elif choice != "select":
            candidates[form], measured[form] = (choice,), True
        elif observable[form]:
            candidates[form], measured[form] = CHOICES[form], True
        else:
            candidates[form], measured[form] = (DEFAULTS[form],), False
    combos = [dict(zip(candidates, values)) for values in product(*candidates.values())]
    if len(combos) == 1:
        return combos[0], measured, None
    solved = [model._solve(steps, part_rows, **combo) for combo in combos]
    best = int(np.argmin([loss for _, loss in solved]))
    return combos[best], measured, solved[best][0]


def alternatives(model) -> list[dict]:
    """The forms the interval also spans: every combination that differs from the chosen one only
    in choices that were assumed."""
    options = [CHOICES[form] if not model.forms_measured_[form] else (model.forms_[form],) for form in OPTIONS]
    combos = [dict(zip(OPTIONS, values)) for values in product(*options)]
    return [combo for combo in combos if combo != model.forms_]


def crossing_observed(hardware, steps: pd.DataFrame, part_rows: pd.DataFrame) -> bool:
    """Whether the observed tensor- and data-parallel collectives that cross nodes can tell the
    algorithms apart: some algorithm must predict their inter-node times in other proportions than
    another, since the network coefficient scales them all alike. Runs that span nodes with only
    pipeline transfers between them (or none) cannot tell how a collective crosses nodes; nor can
    collectives that all cross nodes the same way (one group shape: a factor the coefficient takes)."""
    frames = [r for r in (steps, part_rows) if len(r)]
    if not frames:
        return False
    rows = pd.concat(frames, ignore_index=True)
    inter = []
    for name in COLLECTIVE_ALGORITHMS:
        features = nominal_features(rows, hardware, name)
        inter.append(np.concatenate([features["tp_inter"], features["dp_inter"] - features["tied_inter"]]))
    crossing = inter[0] > 0
    if not crossing.any():
        return False
    for other in inter[1:]:
        ratio = other[crossing] / inter[0][crossing]
        if ratio.max() > ratio.min() * (1 + 1e-3) or (other[~crossing] > 0).any():
            return True
    return False


def overlap_observed(steps: pd.DataFrame, part_rows: pd.DataFrame) -> bool:
    """Whether some observation reduces ZeRO 0-1 gradients over a data-parallel group (d > 1), whose
    wait tells whether the reduction overlapped the backward pass."""
    for rows in (steps, part_rows):
        if len(rows) and ((rows[DP] > 1) & (rows[ZERO] <= 1)).any():
            return True
    return False


def launched_in_backward(shares: pd.DataFrame | None) -> str | None:
    """'buckets' or 'none' as the profiles of ZeRO 0-1 runs with d > 1 show it: whether most of
    their gradient reductions were launched from the autograd thread (hooks that reduce each bucket
    as the backward pass fills it) or after the backward pass returned; None without such a run."""
    if shares is None or not len(shares):
        return None
    runs = shares[(shares[DP] > 1) & (shares[ZERO] <= 1)]
    if runs.empty:
        return None
    return "buckets" if float(runs[VALUE].median()) > 0.5 else "none"
