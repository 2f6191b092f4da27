"""Collectives across ranks: matching, clock alignment, pure durations, alpha-beta fits, cost models.

NCCL kernels (and MPI collectives on CPU threads) of one collective run on every rank; they start
when each rank gets there and end together. Matching pairs the k-th kernel of a name on a rank's j-th NCCL stream with the k-th of the
same name on the j-th NCCL stream of every other rank (streams are numbered by first use, since ids
differ between processes). The pure duration of a collective is its end minus the latest start
over ranks: the time it takes once everyone has arrived, without the waiting for the slowest rank.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from extradeep.columns import (
    BYTES,
    END,
    FILE,
    FIRST_START,
    GROUP,
    KIND,
    LATEST_START,
    NAME,
    NODE,
    PURE,
    QUEUE,
    RANK,
    RANKS,
    ROLE,
    START,
    WAIT,
)
from extradeep.io.categories import is_nccl_kernel

ALGORITHMS = ("ring", "tree")


def collective_groups(ops: pd.DataFrame) -> pd.DataFrame:
    """Matched collectives: one row per member (`node` = row label in `ops`, `group`, `rank`, `name`).

    Only kernels seen on at least two ranks form groups; a rank with fewer occurrences of a name
    leaves the extra ones of other ranks unmatched.
    """
    codes, names = pd.factorize(ops[NAME])
    nccl = np.array([is_nccl_kernel(str(n)) for n in names], dtype=bool)
    mask = ((ops[KIND] == "kernel").to_numpy() & nccl[codes]) | (ops[KIND] == "mpi").to_numpy()
    if ROLE in ops:
        mask &= ops[ROLE] == "op"
    k = ops[mask][[RANK, QUEUE, NAME, START]].sort_values([RANK, START], kind="stable")
    if k.empty or k[RANK].nunique() < 2:
        return pd.DataFrame({NODE: [], GROUP: [], RANK: [], NAME: []}, dtype=np.int64)
    first_use = k.groupby([RANK, QUEUE], sort=False)[START].transform("min")
    k = k.assign(stream_no=first_use.groupby(k[RANK]).rank(method="dense").astype(int))
    k["occurrence"] = k.groupby([RANK, "stream_no", NAME]).cumcount()
    key = ["stream_no", "name", "occurrence"]
    counts = k.groupby(key)[RANK].transform("nunique")
    k = k[counts >= 2]
    k[GROUP] = k.groupby(key, sort=False).ngroup()
    order = k.groupby(GROUP)[START].min().rank(method="first").astype(int) - 1
    return pd.DataFrame(
        {
            NODE: k.index.to_numpy(),
            GROUP: order.reindex(k[GROUP]).to_numpy(),
            RANK: k[RANK].to_numpy(),
            NAME: k[NAME].to_numpy(),
        }
    )


def collective_table(ops: pd.DataFrame, groups: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per matched collective: name, ranks, bytes, earliest/latest start, end, wait and pure duration."""
    groups = collective_groups(ops) if groups is None else groups
    if groups.empty:
        return pd.DataFrame(columns=[GROUP, NAME, RANKS, BYTES, FIRST_START, LATEST_START, END, WAIT, PURE])
    m = ops.loc[groups[NODE]].assign(group=groups[GROUP].to_numpy())
    t = m.groupby(GROUP).agg(
        name=(NAME, "first"),
        ranks=(RANK, "nunique"),
        bytes=(BYTES, "max"),
        first_start=(START, "min"),
        latest_start=(START, "max"),
        end=(END, "max"),
    )
    t[WAIT] = t[LATEST_START] - t[FIRST_START]
    t[PURE] = t[END] - t[LATEST_START]
    return t.reset_index()


def clock_offsets(ops: pd.DataFrame, rank_file: dict) -> dict:
    """One clock offset (ns) per export file, from collective end times (dPRO 4.2, simplified).

    Members of one collective end together, so the median difference of a file's end times to
    the reference file's (the first) is that file's clock offset. Files that share no collective
    with the reference keep offset 0.
    """
    files = sorted(set(rank_file.values()))
    offsets = {f: 0 for f in files}
    groups = collective_groups(ops)
    if len(files) < 2 or groups.empty:
        return offsets
    end = ops.loc[groups[NODE], END].to_numpy()
    frame = pd.DataFrame({GROUP: groups[GROUP].to_numpy(), END: end, FILE: [rank_file[r] for r in groups[RANK]]})
    per_file = frame.groupby([GROUP, FILE])[END].median().unstack()
    ref = files[0]
    for f in files[1:]:
        if ref in per_file and f in per_file:
            diff = (per_file[f] - per_file[ref]).dropna()
            offsets[f] = int(np.median(diff)) if len(diff) else 0
    return offsets


@dataclass
class AlphaBeta:
    """Latency-bandwidth model t = alpha + bytes / bandwidth of one collective, fitted to pure times."""

    name: str
    alpha: float  # seconds
    bandwidth: float  # bytes per second (inf when sizes are unknown)
    n: int
    sized: bool  # whether message sizes were known

    def time(self, nbytes) -> np.ndarray:
        return self.alpha + np.asarray(nbytes, dtype=float) / self.bandwidth


def fit_alpha_beta(table: pd.DataFrame) -> dict[str, AlphaBeta]:
    """Per collective name: non-negative least squares of pure duration on bytes.

    Without sizes (no NVTX payloads) alpha is the smallest pure duration seen, the rest of each
    instance being its bandwidth term.
    """
    out = {}
    for name, g in table.groupby(NAME):
        t, m = g[PURE].to_numpy(float), g[BYTES].to_numpy(float)
        sized = bool(np.all(m > 0)) and np.ptp(m) > 0
        if sized:
            alpha, beta = _nonnegative_line(m, t)
            bw = 1.0 / beta if beta > 0 else math.inf
        else:
            alpha, bw = float(np.min(t)) if len(t) else 0.0, math.inf
        out[name] = AlphaBeta(name=str(name), alpha=alpha, bandwidth=bw, n=len(t), sized=sized)
    return out


def _nonnegative_line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least squares y = a + b x with a, b >= 0 (a tiny 2-variable NNLS)."""
    from scipy.optimize import nnls

    coef, _ = nnls(np.column_stack([np.ones_like(x), x]), y)
    return float(coef[0]), float(coef[1])


def collective_kind(name: str) -> str:
    """all_reduce, all_gather, reduce_scatter, broadcast, send_recv or other, from a kernel name."""
    low = name.lower().replace("_", "")
    for key, kind in (
        ("allreduce", "all_reduce"),
        ("allgather", "all_gather"),
        ("reducescatter", "reduce_scatter"),
        ("broadcast", "broadcast"),
        ("sendrecv", "send_recv"),
        ("send", "send_recv"),
        ("recv", "send_recv"),
    ):
        if key in low:
            return kind
    return "other"


def model_time(kind: str, p: int, alpha: float, volume_time: float, algorithm: str = "ring") -> float:
    """Cost of a collective on p ranks with per-step latency alpha and m/B = volume_time.

    ring: all-reduce 2(p-1)a + 2(p-1)/p m/B; all-gather, reduce-scatter (p-1)a + (p-1)/p m/B;
    tree (double binary tree): all-reduce 2 log2(p) a + 2 m/B, others log2(p) a + m/B. Send/recv
    and unknown kinds do not depend on p.
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {ALGORITHMS}")
    if p < 2 or kind in ("send_recv", "other"):
        return alpha + volume_time
    factor = 2.0 if kind == "all_reduce" else 1.0
    if algorithm == "ring":
        return factor * ((p - 1) * alpha + (p - 1) / p * volume_time)
    return factor * (math.log2(p) * alpha + volume_time)


def rescale_collective(
    kind: str,
    pure: float,
    alpha: float,
    p_from: int,
    p_to: int,
    algorithm: str = "ring",
    latency: float = 1.0,
    bandwidth: float = 1.0,
) -> float:
    """Pure duration at p_to ranks of a collective measured as `pure` at p_from ranks, with its
    latency multiplied by `latency` and its bandwidth by `bandwidth`.

    `alpha` is the latency part of `pure` at p_from; it is split into a per-step latency and the
    rest of `pure` into the message volume time m/B, then the model is evaluated at p_to.
    """
    alpha = min(alpha, pure)
    p_from = max(int(p_from), 1)
    step_latency = alpha / model_time(kind, p_from, 1.0, 0.0, algorithm)
    volume_time = (pure - alpha) / model_time(kind, p_from, 0.0, 1.0, algorithm)
    return model_time(kind, p_to, step_latency * latency, volume_time / bandwidth, algorithm)
