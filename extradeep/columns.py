"""The tidy tables' vocabulary, defined once: column names, metrics, phases and categories.

Every reader returns per-step sums with STEP_SUM_COLUMNS; aggregation keys regions by REGION_KEYS;
epoch totals sum EPOCH_CATEGORIES only (CPU-side work overlaps the GPU work it launches).
"""

from __future__ import annotations

# columns of a reader's per-step sums (one row per region, metric, epoch, phase and step)
REGION, KIND, CATEGORY, METRIC, PHASE, EPOCH, STEP, VALUE = (
    "region",
    "kind",
    "category",
    "metric",
    "phase",
    "epoch",
    "step",
    "value",
)
STEP_SUM_COLUMNS = [REGION, KIND, CATEGORY, METRIC, EPOCH, PHASE, STEP, VALUE]
REGION_ID = [REGION, KIND, CATEGORY, METRIC]  # one region's metric (an analysis models both phases)
REGION_KEYS = [*REGION_ID, PHASE]  # one measured series, per phase (aggregation)
REP, RANK = "rep", "rank"  # repetition and rank of a file

# metrics
TIME, VISITS, BYTES = "time", "visits", "bytes"
METRICS = (TIME, VISITS, BYTES)

# phases: training steps, validation steps, and events between the steps of a measured epoch
TRAIN, VAL, BETWEEN = "train", "val", "between"
PHASES = (TRAIN, VAL, BETWEEN)

# categories
COMPUTATION, COMMUNICATION, MEMORY = "computation", "communication", "memory"
NVTX, CUDA_API, OS, LIBRARY = "nvtx", "cuda_api", "os", "library"
STEP_CATEGORY = "step"  # the measured step wall time (region "step") and GPU busy time (region "gpu busy")
EPOCH_CATEGORIES = (COMPUTATION, COMMUNICATION, MEMORY)
CPU_CATEGORIES = (NVTX, CUDA_API, OS, LIBRARY)
TOTAL = "total"  # region/category name of Eq. 6: computation + communication + memory

# special regions
STEP_REGION = "step"  # the NVTX step wall time
BUSY_REGION = "gpu busy"  # the union of all GPU work inside a step (idle = step - busy)

# host overheads of Lin et al. (DLRM performance model, section III-C): the overhead table's types,
# one line each for `predict`'s output, its --help and docs/predictor.md
OVERHEAD_TYPES = {
    "T1": "gap between two consecutive top-level framework ops of one step (charged to the later op)",
    "T2": "from a framework op's start to its first CUDA runtime call",
    "T3": "from a framework op's last CUDA runtime call to the op's end",
    "T4": "duration of one CUDA runtime call (per API name)",
    "T5": "gap between two consecutive runtime calls inside one op (without op ranges: the gap before "
    "each launch, per launched GPU op)",
}
