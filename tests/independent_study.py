"""An independently built study: Nsight Systems SQLite exports of a data-parallel training on nodes
of 4 GPUs, written without extradeep (neither its simulator nor its schema files).

The tables are created with the DDL of a real export (``yyhtbs-yye__mmagic_vsr_v2__net.sqlite``,
nsys 2024.2.1, from ../shared/real_nsys) and its ENUM rows; the GPU rows copy that export's A100
rows. The node layout lives only where the issue's study keeps it: every export lists its node's
four GPUs with their UUIDs (``TARGET_INFO_GPU``) and names its node in ``EXPORT_HOST``; there is
no ``TARGET_INFO_SYSTEM_ENV`` and no ``META_DATA_CAPTURE``.

The timing law (the ground truth), per training step of rank r:

* an input copy (HtoD), then forward and backward kernels lasting ``COMPUTE_S`` in all, each
  rank's drawn with ``noise`` (relative, per rank and step);
* the gradients (``grad_bytes``, 100 MB by default) all-reduced in ``BUCKETS`` NCCL ring all-reduces after the
  backward pass. Each lasts, on every rank, from that rank's arrival until the last rank has
  arrived plus the ring's pure time ``LAUNCH_S + 2 (p-1) alpha + 2 (p-1)/p m / bw``, with NVLink's
  alpha and bandwidth inside one node and, once p spans nodes, the network's: one NIC of
  ``NIC_BPS`` shared by the node's four GPUs;
* an optimizer kernel. A validation step is forward kernels only.

Files are named ``app.p<P>.r<rep>.mpi<rank>.sqlite``. :func:`expected_epoch_time` gives what a
measurement at P ranks yields on average (medians over steps, ranks and repetitions, by Monte
Carlo over many repetitions of the same law), the truth the predictions are checked against.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

SCHEMA_EXPORT = "yyhtbs-yye__mmagic_vsr_v2__net.sqlite"
GPUS_PER_NODE = 4
COMPUTE_S = 0.060  # forward + backward per training step
VAL_S = 0.020  # forward per validation step
COPY_S, OPT_S = 0.001, 0.002
GRAD_BYTES, BUCKETS = 100e6, 4
LAUNCH_S = 10e-6
NVLINK = (2.5e-6, 150e9)  # alpha (s per ring step), bandwidth (B/s) inside a node
NIC_BPS, NET_ALPHA = 25e9, 7e-6  # one 200 Gb/s NIC per node, shared by its GPUs
TRAIN_STEPS, VAL_STEPS, EPOCHS = 4, 1, 2
NOISE = 0.01
TABLES = (
    "StringIds",
    "ThreadNames",
    "PROCESSES",
    "NVTX_EVENTS",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "TARGET_INFO_GPU",
    "TARGET_INFO_SESSION_START_TIME",
    "META_DATA_EXPORT",
)
ENUMS = ("ENUM_NSYS_EVENT_TYPE", "ENUM_CUDA_MEMCPY_OPER", "ENUM_CUDA_KERNEL_LAUNCH_TYPE", "ENUM_CUPTI_STREAM_TYPE")
FORWARD = [f"sm80_xmma_fprop_implicit_gemm_{k}" for k in range(3)] + ["vectorized_elementwise_kernel"]
BACKWARD = [f"sm80_xmma_dgrad_implicit_gemm_{k}" for k in range(3)] + ["reduce_kernel"]
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"


def ring_allreduce_s(ranks: int, nbytes: float) -> float:
    """Pure time of one ring all-reduce of ``nbytes`` over ``ranks`` ranks on 4-GPU nodes."""
    if ranks < 2:
        return LAUNCH_S
    alpha, bandwidth = NVLINK if ranks <= GPUS_PER_NODE else (NET_ALPHA, NIC_BPS / GPUS_PER_NODE)
    return LAUNCH_S + 2 * (ranks - 1) * alpha + 2 * (ranks - 1) / ranks * nbytes / bandwidth


def _step_times(ranks: int, rng: np.random.Generator, steps: int, grad_bytes: float) -> np.ndarray:
    """(steps,) training step times of one run: the slowest rank's compute sets when the ring starts."""
    compute = COMPUTE_S * (1 + NOISE * rng.standard_normal((steps, ranks)))
    comm = BUCKETS * ring_allreduce_s(ranks, grad_bytes / BUCKETS)
    return COPY_S + compute.max(axis=1) + comm + OPT_S


def expected_epoch_time(
    ranks: int, n_train: int, n_val: int, grad_bytes: float = GRAD_BYTES, reps: int = 2, trials: int = 400
) -> float:
    """The epoch time a measurement at ``ranks`` gives on average: n_train x the median training
    step (every rank leaves the all-reduce together, so each rank's median is the run's) + n_val
    x the validation step, the median of ``reps`` repetitions, averaged over ``trials``."""
    rng = np.random.default_rng(ranks)
    medians = [
        np.median([np.median(_step_times(ranks, rng, TRAIN_STEPS, grad_bytes)) for _ in range(reps)])
        for _ in range(trials)
    ]
    return float(n_train * np.mean(medians) + n_val * (VAL_S + COPY_S))


# -- the writer ---------------------------------------------------------------------------------------


class _Strings:
    def __init__(self):
        self.ids: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        return self.ids.setdefault(text, len(self.ids) + 1)


def _template(real_dir: Path) -> tuple[dict, dict, list, list]:
    """(DDL per table, ENUM rows per table, TARGET_INFO_GPU rows, META_DATA_EXPORT rows) of the real export."""
    conn = sqlite3.connect(f"file:{real_dir / SCHEMA_EXPORT}?mode=ro&immutable=1", uri=True)
    try:
        ddl = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall())
        enums = {t: conn.execute(f"SELECT * FROM {t}").fetchall() for t in ENUMS}
        gpus = conn.execute("SELECT * FROM TARGET_INFO_GPU ORDER BY id").fetchall()
        meta = conn.execute("SELECT name, value FROM META_DATA_EXPORT").fetchall()
    finally:
        conn.close()
    return ddl, enums, gpus, meta


class StudyWriter:
    """Writes the exports of runs at given rank counts into one folder (see the module's docstring)."""

    def __init__(self, real_dir: Path, outdir: Path, app: str = "indep", seed: int = 0, grad_bytes: float = GRAD_BYTES):
        self.ddl, self.enums, self.gpus, self.meta = _template(Path(real_dir))
        self.outdir, self.app, self.seed, self.grad_bytes = Path(outdir), app, seed, grad_bytes
        self.outdir.mkdir(parents=True, exist_ok=True)

    def write_run(self, ranks: int, rep: int) -> list[Path]:
        rng = np.random.default_rng([self.seed, ranks, rep])
        epochs = []
        for epoch in range(EPOCHS):
            warm = 1.3 if epoch == 0 else 1.0  # the first epoch is slower (caches, autotuning)
            compute = COMPUTE_S * warm * (1 + NOISE * rng.standard_normal((TRAIN_STEPS, ranks)))
            epochs.append(compute)
        return [self._write_rank(ranks, rep, rank, [c[:, rank] for c in epochs], epochs) for rank in range(ranks)]

    def _write_rank(self, ranks: int, rep: int, rank: int, mine: list, everyone: list) -> Path:
        path = self.outdir / f"{self.app}.p{ranks}.r{rep}.mpi{rank}.sqlite"
        if path.exists():
            path.unlink()
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("PRAGMA synchronous = OFF")
        for table in (*TABLES, *self.enums):
            conn.execute(self.ddl[table])
        for table, rows in self.enums.items():
            if rows:
                conn.executemany(f"INSERT INTO {table} VALUES ({','.join('?' * len(rows[0]))})", rows)
        pid = 4000 + rank
        gpid, gtid = (1 << 48) | (pid << 24), (1 << 48) | (pid << 24) | pid
        strings = _Strings()
        rows = {"NVTX_EVENTS": [], "CUPTI_ACTIVITY_KIND_RUNTIME": [], "CUPTI_ACTIVITY_KIND_KERNEL": [], "copy": []}
        device = rank % GPUS_PER_NODE
        t, corr = 2_000_000_000, 1
        comm = ring_allreduce_s(ranks, self.grad_bytes / BUCKETS)

        def launch(name, start_s, dur_s, stream=7):
            nonlocal corr
            api = int(start_s * 1e9)
            rows["CUPTI_ACTIVITY_KIND_RUNTIME"].append(
                (api, api + 4000, 0, gtid, corr, strings("cudaLaunchKernel_v7000"), 0)
            )
            begin = api + 5000
            rows["CUPTI_ACTIVITY_KIND_KERNEL"].append(
                (begin, begin + int(dur_s * 1e9), device, 1, 0, stream, corr, gpid, strings(name), strings(name), None)
            )
            corr += 1
            return (begin + int(dur_s * 1e9)) / 1e9

        now = t / 1e9
        for epoch in range(EPOCHS):
            epoch_start = now
            for step in range(TRAIN_STEPS):
                start = now
                api = int(now * 1e9)
                rows["CUPTI_ACTIVITY_KIND_RUNTIME"].append(
                    (api, api + 3000, 0, gtid, corr, strings("cudaMemcpyAsync_v3020"), 0)
                )
                rows["copy"].append((api + 4000, api + 4000 + int(COPY_S * 1e9), device, corr, gpid))
                corr += 1
                now += COPY_S + 4e-6
                part = mine[epoch][step] / (len(FORWARD) + len(BACKWARD))
                for name in FORWARD + BACKWARD:
                    now = launch(name, now, part - 5e-6) if part > 5e-6 else now
                arrival = start + COPY_S + 4e-6 + everyone[epoch][step].max()
                finish = arrival + 4e-6
                for _ in range(BUCKETS):  # waits for the last rank, then the ring
                    finish = finish + comm
                    launch(ALLREDUCE, now, finish - now - 5e-6, stream=20)
                    now = finish
                now = launch("multi_tensor_apply_kernel", now, OPT_S - 5e-6)
                self._range(rows, f"train_step {step}", start, now, gtid)
            for step in range(VAL_STEPS):
                start = now
                for name in FORWARD:
                    now = launch(name, now, VAL_S / len(FORWARD) - 5e-6)
                now = launch("vectorized_elementwise_kernel", now, COPY_S - 5e-6)
                self._range(rows, f"val_step {step}", start, now, gtid)
            self._range(rows, f"epoch {epoch}", epoch_start, now, gtid)
            now += 1e-3
        self._insert(conn, rows, strings, pid, gpid, gtid, ranks, path)
        conn.commit()
        conn.close()
        return path

    @staticmethod
    def _range(rows, text, start_s, end_s, gtid):
        rows["NVTX_EVENTS"].append(
            (int(start_s * 1e9), int(end_s * 1e9), 59, None, None, None, text, gtid, None, None, 0)
        )

    def _insert(self, conn, rows, strings, pid, gpid, gtid, ranks, path):
        node = int(path.name.split(".mpi")[1].split(".")[0]) // GPUS_PER_NODE
        conn.executemany(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, rangeId, category, color, text, globalTid, "
            "endGlobalTid, textId, domainId) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            rows["NVTX_EVENTS"],
        )
        conn.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, correlationId, nameId, "
            "returnValue) VALUES (?,?,?,?,?,?,?)",
            rows["CUPTI_ACTIVITY_KIND_RUNTIME"],
        )
        conn.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, greenContextId, streamId, "
            "correlationId, globalPid, demangledName, shortName, mangledName, registersPerThread, gridX, gridY, "
            "gridZ, blockX, blockY, blockZ, staticSharedMemory, dynamicSharedMemory, localMemoryPerThread, "
            "localMemoryTotal, gridId) VALUES (?,?,?,?,?,?,?,?,?,?,?,32,108,1,1,256,1,1,0,0,0,0,1)",
            rows["CUPTI_ACTIVITY_KIND_KERNEL"],
        )
        conn.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, correlationId, "
            "globalPid, bytes, copyKind) VALUES (?,?,?,1,7,?,?,12582912,1)",
            rows["copy"],
        )
        # the node's four GPUs: the real export's A100 rows with this node's UUIDs
        for local, row in enumerate(self.gpus[:GPUS_PER_NODE]):
            cols = [r[1] for r in conn.execute("PRAGMA table_info(TARGET_INFO_GPU)")]
            values = dict(zip(cols, row))
            values.update(id=local, cuDevice=local, uuid=f"{0xA100 + node:08x}-7e57-4c0d-9a1e-{local:012x}")
            conn.execute(f"INSERT INTO TARGET_INFO_GPU VALUES ({','.join('?' * len(cols))})", [values[c] for c in cols])
        meta = [(k, v) for k, v in self.meta if "PATH" not in k and k != "EXPORT_HOST"]
        meta += [("EXPORT_HOST", f"dgx{node:03d}")]
        conn.executemany("INSERT INTO META_DATA_EXPORT VALUES (?, ?)", meta)
        conn.execute("INSERT INTO PROCESSES VALUES (?, ?, ?)", (gpid, pid, "python"))
        conn.execute("INSERT INTO ThreadNames VALUES (?, ?, ?)", (strings("python"), 0, gtid))
        conn.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, ?, ?)", (1_717_000_000_000_000_000, "", ""))
        conn.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, s) for s, i in strings.ids.items()])
