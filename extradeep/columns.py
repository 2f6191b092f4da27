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

# parallel layouts (extradeep.layouts, issue 23): one row per layout of a GPT-like training
GPUS, TP, PP, DP = "gpus", "tp", "pp", "dp"  # GPUs in all; tensor-, pipeline-, data-parallel degrees
GLOBAL_BATCH, MICRO_BATCH, MICRO_BATCHES = "global_batch", "micro_batch", "micro_batches"  # samples; samples; count
# ZeRO/FSDP stage 0-3; recomputation none|selective|full; schedule 1f1b|interleaved|gpipe; chunks per GPU
ZERO, RECOMPUTE, SCHEDULE, CHUNKS = "zero", "recompute", "schedule", "chunks"
LAYERS, HIDDEN, HEADS, SEQ_LEN, VOCAB = "layers", "hidden", "heads", "seq_len", "vocab"  # the model's shape
STEP_TIME = "step_time"  # seconds per training step (measured in a table, or predicted)
PART = "part"  # per-part observations: layout + shape columns, PART, METRIC (time|bytes), VALUE
LAYOUT_PARTS = ("step", "compute", "host_overhead", "tp_comm", "pp_p2p", "pp_bubble", "dp_sync", "optimizer", "memory")
WORKLOAD = "workload"  # which model a layout row trains (a label: "GPT 39.1B"); groups for held-out checks

# the strategy search's table (extradeep.predictor.optimize): one row per strategy, best first
STRATEGY, STRATEGY_TYPE, SETTING, DETAIL = "strategy", "type", "setting", "detail"
PREDICTED_S, LOWER_S, UPPER_S, MEASURED_S = "predicted_s", "lower_s", "upper_s", "measured_s"
GAIN, CRITICAL_PATH, MEMORY_GB, FITS, PROPOSED = "gain", "critical_path", "memory_gb", "fits", "proposed"
STRATEGY_COLUMNS = [
    STRATEGY,
    STRATEGY_TYPE,
    PREDICTED_S,
    LOWER_S,
    UPPER_S,
    MEASURED_S,
    GAIN,
    CRITICAL_PATH,
    SETTING,
    MEMORY_GB,
    FITS,
    PROPOSED,
    DETAIL,
]
# layouts read from profiles (extradeep.io.parallel): the layout of a run and the place of a rank in it
FRAMEWORK = "framework"  # megatron | deepspeed | fsdp | ddp, from the profiles' markers
LAYOUT_FIELDS = (TP, PP, DP, MICRO_BATCH, MICRO_BATCHES, ZERO, RECOMPUTE, CHUNKS, SCHEDULE, FRAMEWORK)
STAGE, TP_RANK, DP_RANK = "stage", "tp_rank", "dp_rank"  # a rank's pipeline stage and its coordinates
PASSES = "passes"  # backward passes per step a profile shows: micro-batches x chunks per stage
SOURCE_SUFFIX = "_source"  # a runs' layout table: <field>_source says where the field's value was read
COMPUTE_NODE = "node"  # the machine a rank ran on (extradeep.io.placement: ranks that shared a node)
# the parts of LAYOUT_PARTS by name: a step's time split exclusively (they sum to the step), and memory
(
    PART_STEP,
    PART_COMPUTE,
    PART_HOST,
    PART_TP,
    PART_PP_P2P,
    PART_BUBBLE,
    PART_DP,
    PART_OPTIMIZER,
    PART_MEMORY,
) = LAYOUT_PARTS
# per-rank detail of a step beside that split: busy time of the compute kernels by pass, and of the
# collectives by process-group role (waiting included), with counts, bytes and pure time
PART_FORWARD, PART_BACKWARD, PART_RECOMPUTE, PART_OTHER_COMPUTE = "forward", "backward", "recompute", "other_compute"
PART_TP_KERNELS, PART_PP_KERNELS = "tp_collectives", "pp_transfers"
PART_DP_KERNELS, PART_OTHER_KERNELS = "dp_collectives", "other_collectives"
PART_IDLE = "idle"  # the step minus the union of its compute kernels
DETAIL_PARTS = (
    PART_FORWARD,
    PART_BACKWARD,
    PART_RECOMPUTE,
    PART_OTHER_COMPUTE,
    PART_TP_KERNELS,
    PART_PP_KERNELS,
    PART_DP_KERNELS,
    PART_OTHER_KERNELS,
    PART_IDLE,
)
PURE_TIME = "pure_time"  # a collective's time from its last member's arrival to its end (matched over ranks)
# of dp_sync, the time a rank waits in data-parallel (and other) collectives for the group's last member to
# arrive (matched over ranks): rank skew, not the collective's cost
PEER_WAIT = "peer_wait"
# of dp_collectives, the share of the gradient reductions' bytes (all-reduce, reduce-scatter) launched from
# the autograd thread: reduced bucket by bucket during the backward pass, not after it
IN_BACKWARD = "in_backward"
PART_POWER, WATTS = "power", "watts"  # a profile's mean GPU board power while training (GPU metric samples)
ALLOCATED, RESERVED = "bytes", "reserved"  # memory metrics: peak allocated bytes (as LAYOUT_PARTS), reserved

# the replayed run's trace frames (extradeep.predictor.trace.RunTrace, as extradeep.io.read.read_replay_frames
# returns them; times in integer ns): ops, syncs, records, steps, ranges, os_calls and files
QUEUE, IS_GPU, NAME, START, END, CORR = "queue", "is_gpu", "name", "start", "end", "corr"  # one op on one queue
STREAM, THREAD = "stream", "thread"  # a GPU op's CUDA stream; a CPU op's thread (queues are built from them)
SYNC_TYPE, EVENT_ID, CALL_START = "sync_type", "event_id", "call_start"  # synchronisations and event records
WARMUP, STEP_ID = "warmup", "step_id"  # a step before measuring starts; a step's id across ranks and phases
PATH, PID, OFFSET_NS = "path", "pid", "offset_ns"  # a rank's file, its process and its clock shift (ns)
# the op graph's node and edge tables (extradeep.predictor.graph.OpGraph; times in s): a node's ROLE (op,
# step mark, wake, virtual collective) and its collective COLL; an edge from SRC to DST with LAG seconds
ROLE, COLL, NODE = "role", "coll", "node"
SRC, DST, LAG = "src", "dst", "lag"
# matched collectives (extradeep.predictor.collectives): one row per collective (group) or member (node);
# RANKS is also the usual parameter of a scaling experiment (ranks of a run: advisor, campaign, cost)
GROUP, RANKS, FIRST_START, LATEST_START, WAIT, PURE, LAUNCH = (
    "group",
    "ranks",
    "first_start",
    "latest_start",
    "wait",
    "pure",
    "launch",
)
# replayed steps (extradeep.predictor.api): one step's measured and replayed time (s), and its window;
# LO and HI also bound a prediction's interval (extradeep.analysis.evaluation, advisor)
MEASURED, REPLAYED, LO, HI = "measured", "replayed", "lo", "hi"
# host overhead statistics (extradeep.predictor.overheads): one row per OVERHEAD_TYPES type and name
OVERHEAD_TYPE, COUNT, MEAN, MEDIAN, STD, P95, STAT_TOTAL = "type", "count", "mean", "median", "std", "p95", "total"
# the exposure curve (extradeep.predictor.exposure): at communication factor K, the replayed step time
# (s) and the share of the added communication the step hides
K, CURVE_STEP, HIDDEN_SHARE = "k", "step", "hidden"

# the layout search's table (extradeep.layouts.search): one row per layout on one hardware, with the
# whole training's time (s), GPU hours, energy and money, and whether it is on the time-cost Pareto front
HARDWARE, RUN_TIME, TIME_LOW, TIME_HIGH = "hardware", "time", "time_low", "time_high"
GPU_HOURS, COST, POWER_W, ENERGY_KWH, ENERGY_COST, PARETO = (
    "gpu_hours",
    "cost",
    "power_w",
    "energy_kwh",
    "energy_cost",
    "pareto",
)
PEAK_MEMORY, PREDICTED = "peak_memory", "predicted"  # a layout's peak allocated bytes; a predicted step time
MEMORY_TOTAL = "total"  # extradeep.layouts.memory: the sum of a layout's memory parts (bytes)
# the GUI's region table (gui.workspace): the tree group a region is listed under (its category or kind)
REGION_GROUP = "group"
# the breakdown's parts (extradeep.analysis.parts, report.breakdown_plot): GPU activity summed over streams
# above the epoch time (concurrent streams counted once each), and epoch time above the summed parts
OVERLAP, UNEXPLAINED = "overlap", "unexplained"
# a reader's per-step sums before aggregation (extradeep.aggregate.medians): the file a row was read from
FILE = "file"

# Megatron DDP's default gradient bucket (parameters): the simulator's buckets and the layout model's
GRADIENT_BUCKET_PARAMS = 40_000_000
