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

# parallel layouts (issue 23): a run's layout as columns (names as in file-name tokens and manifests)
TP, PP, DP = "tp", "pp", "dp"  # tensor-parallel degree, pipeline stages, data-parallel degree
MICRO_BATCH, MICRO_BATCHES = "mbs", "nmb"  # micro-batch size; micro-batches per step and replica
ZERO, RECOMPUTE, VIRTUAL_STAGES = "zero", "recompute", "vpp"  # ZeRO/FSDP stage 0-3; none/selective/full
SCHEDULE, FRAMEWORK, WORLD = "schedule", "framework", "world"  # 1f1b/interleaved; megatron/deepspeed/fsdp
LAYOUT_FIELDS = (TP, PP, DP, MICRO_BATCH, MICRO_BATCHES, ZERO, RECOMPUTE, VIRTUAL_STAGES, SCHEDULE, FRAMEWORK)
STAGE, TP_RANK, DP_RANK = "stage", "tp_rank", "dp_rank"  # a rank's pipeline stage and its coordinates
# the parts of a training step (the per-part observation frame, io/parallel/parts.py)
PART = "part"
PART_STEP, PART_IDLE, PART_MEMORY = "step", "idle", "memory_peak"
PART_FORWARD, PART_BACKWARD, PART_RECOMPUTE = "forward", "backward", "recompute"
PART_OPTIMIZER, PART_OTHER_COMPUTE = "optimizer", "other_compute"
PART_TP, PART_PP, PART_DP, PART_OTHER_COMM = "tp_comm", "pp_comm", "dp_comm", "other_comm"
PARTS = (
    PART_STEP,
    PART_FORWARD,
    PART_BACKWARD,
    PART_RECOMPUTE,
    PART_OPTIMIZER,
    PART_OTHER_COMPUTE,
    PART_TP,
    PART_PP,
    PART_DP,
    PART_OTHER_COMM,
    PART_IDLE,
    PART_MEMORY,
)
PURE_TIME = "pure_time"  # a collective's time from its last member's arrival to its end (matched over ranks)
