"""Speed of the trace-based predictor: graph building and replay at 64 ranks x 2,000 activities per step.

A synthetic DDP-like run is built directly as a RunTrace (per rank and step: 1,000 launches on a CPU
thread, 1,000 GPU ops on the compute stream, 8 all-reduce buckets on an NCCL stream behind event
waits, a blocking stream sync at the step end), so the figure measures the predictor, not a reader.
Then the simulator's DDP mode at 16 ranks measures the whole path from the exports.

    /tmp/venv/bin/python benchmarks/bench_predictor.py [--ranks 64] [--activities 2000] [--steps 2]
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np
import pandas as pd

from extradeep.predictor.graph import build_graph
from extradeep.predictor.replay import plan_replay, replay
from extradeep.predictor.trace import OP_COLUMNS, RunTrace
from extradeep.predictor.whatif import CommContext, parse_what_if, scale_durations

US = 1000  # ns
ACCUMULATE = "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"


def synthetic_trace(
    ranks: int,
    activities: int,
    steps: int,
    seed: int = 0,
    comm_us: float = 400.0,
    grad_every: int = 0,
    sync_all: bool = False,
) -> RunTrace:
    """Per rank and step `activities` ops: half CPU launches, half GPU ops, causally scheduled.
    `comm_us`: pure time of each all-reduce bucket; `grad_every`: an AccumulateGrad range on the CPU
    after every that many kernels of the backward half (0: none), as PyTorch records gradients;
    `sync_all`: the step ends with a device synchronize (waiting for the collectives too)."""
    rng = np.random.default_rng(seed)
    kernels = activities // 2
    buckets = 8
    ops, syncs, records, step_rows, grads = [], [], [], [], []
    step_start = np.zeros(ranks)
    t0 = 0.0
    for step in range(steps):
        cpu = np.full(ranks, t0) + rng.uniform(0, 50 * US, ranks)  # rank imbalance
        gpu = cpu.copy()
        nccl = np.full(ranks, t0)
        corr = step * 10 * activities
        step_start = cpu.copy()
        for k in range(kernels):
            corr += 1
            cpu += 12 * US
            launch_end = cpu + 5 * US
            dur = rng.uniform(5, 60, ranks) * US
            start = np.maximum(gpu, cpu + 3 * US)
            gpu = start + dur
            for r in range(ranks):
                ops.append(
                    (r, "cpu/t1", False, "runtime", "cudaLaunchKernel", "cuda_api", cpu[r], launch_end[r], corr, 0.0)
                )
                ops.append(
                    (
                        r,
                        "gpu0/s7",
                        True,
                        "kernel",
                        f"gemm_{k % 7}" if k % 3 == 0 else f"elementwise_{k % 11}",
                        "computation",
                        start[r],
                        gpu[r],
                        corr,
                        0.0,
                    )
                )
            cpu = launch_end
            if grad_every and k > kernels // 2 and (k + 1) % grad_every == 0:
                for r in range(ranks):
                    grads.append((r, "cpu/t1", ACCUMULATE, cpu[r], cpu[r] + 2 * US))
                cpu += 2 * US
            if (k + 1) % (kernels // buckets) == 0 and k > kernels // 2:
                corr += 1
                event = corr
                nccl_ready = np.maximum(nccl, gpu)
                nccl_end = nccl_ready.max() + comm_us * US
                for r in range(ranks):
                    records.append((r, "gpu0/s7", event, corr, cpu[r]))
                    syncs.append((r, 2, "gpu0/s13", event, corr, cpu[r]))
                    ops.append(
                        (r, "cpu/t1", False, "runtime", "ncclAllReduce", "cuda_api", cpu[r], cpu[r] + 6 * US, corr, 0.0)
                    )
                    ops.append(
                        (
                            r,
                            "gpu0/s13",
                            True,
                            "kernel",
                            "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                            "communication",
                            nccl_ready[r],
                            nccl_end,
                            corr,
                            0.0,
                        )
                    )
                nccl = np.full(ranks, nccl_end)
                cpu += 6 * US
        corr += 1
        done = np.maximum(gpu, nccl)
        for r in range(ranks):
            syncs.append((r, 4 if sync_all else 3, "gpu0/s7", -1, corr, cpu[r]))
            ops.append(
                (
                    r,
                    "cpu/t1",
                    False,
                    "runtime",
                    "cudaDeviceSynchronize" if sync_all else "cudaStreamSynchronize",
                    "cuda_api",
                    cpu[r],
                    done[r] + 4 * US,
                    corr,
                    0.0,
                )
            )
            step_rows.append((r, False, 0, "train", step, step_start[r], done[r] + 6 * US, "cpu/t1"))
        t0 = float(done.max()) + 20 * US
    ops = pd.DataFrame(ops, columns=OP_COLUMNS)
    ops[["start", "end"]] = ops[["start", "end"]].astype(np.int64)
    syncs = pd.DataFrame(syncs, columns=["rank", "sync_type", "queue", "event_id", "corr", "call_start"])
    records = pd.DataFrame(records, columns=["rank", "queue", "event_id", "corr", "call_start"])
    for f in (syncs, records):
        f["call_start"] = f["call_start"].astype(np.int64)
    steps_df = pd.DataFrame(step_rows, columns=["rank", "warmup", "epoch", "phase", "step", "start", "end", "queue"])
    steps_df[["start", "end"]] = steps_df[["start", "end"]].astype(np.int64)
    steps_df["step_id"] = np.arange(len(steps_df))
    files = pd.DataFrame({"rank": range(ranks), "path": [f"r{r}" for r in range(ranks)], "pid": 0, "offset_ns": 0})
    ranges = pd.DataFrame(grads, columns=["rank", "queue", "name", "start", "end"])
    ranges[["start", "end"]] = ranges[["start", "end"]].astype(np.int64)
    return RunTrace(
        ops=ops,
        syncs=syncs,
        records=records,
        steps=steps_df,
        ranges=ranges,
        os_calls=ranges.drop(columns="name").iloc[:0],
        files=files,
    )


def timed(label, fn):
    t = time.perf_counter()
    out = fn()
    print(f"  {label:<34} {time.perf_counter() - t:8.3f} s")
    return out


def bench_synthetic(ranks: int, activities: int, steps: int) -> None:
    trace = synthetic_trace(ranks, activities, steps)
    print(f"synthetic: {ranks} ranks x {activities} activities/step x {steps} steps = {len(trace.ops)} ops")
    graph = timed("build graph", lambda: build_graph(trace))
    print(f"  graph: {graph.n} nodes, {len(graph.src)} edges")
    plan = timed("plan (topological levels)", lambda: plan_replay(graph))
    print(f"  levels: {len(plan.bounds)}")
    res = timed("replay (measured durations)", lambda: replay(graph, plan))
    changes = parse_what_if("kernel:gemm*=0.5; comm.bandwidth=2").changes
    dur, gap = scale_durations(graph.nodes, graph.dur, graph.gap, changes, CommContext({}, ranks))
    timed("replay (what-if)", lambda: replay(graph, plan, dur=dur, gap=gap))
    marks = graph.nodes[graph.nodes["role"] == "marker"]
    t = pd.DataFrame({"id": marks["step"], "edge": marks["name"], "m": marks["start"], "r": res.start[marks.index]})
    w = t.pivot_table(index="id", columns="edge", values=["m", "r"])
    err = ((w["r"]["step_end"] - w["r"]["step_start"]) / (w["m"]["step_end"] - w["m"]["step_start"]) - 1).abs()
    print(f"  step-time error of the replay: median {100 * err.median():.3f} %, max {100 * err.max():.3f} %")


def bench_simulator(ranks: int) -> None:
    from extradeep.predictor import predict
    from extradeep.simulate import simulate

    with tempfile.TemporaryDirectory() as out:
        simulate(out, params={"ranks": [ranks]}, repetitions=1, epochs=2, train_steps=4, val_steps=1, ddp=True)
        print(f"simulator DDP run: {ranks} ranks, 2 epochs x 5 steps")
        pred = timed(
            "predict() incl. reading, 2 what-ifs",
            lambda: predict(out, what_if=["kernel:*gemm*=0.5", "comm.bandwidth=2"]),
        )
        err = pred.steps["error"].abs()
        print(
            f"  {len(pred.graph.nodes)} nodes; step-time error median {100 * err.median():.4f} %, "
            f"max {100 * err.max():.4f} %"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--activities", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--sim-ranks", type=int, default=16)
    args = parser.parse_args()
    bench_synthetic(args.ranks, args.activities, args.steps)
    bench_simulator(args.sim_ranks)


if __name__ == "__main__":
    main()
