"""`extradeep simulate OUTDIR`: write simulated Nsight Systems exports with known ground truth."""

from __future__ import annotations

HELP = "write simulated Nsight Systems SQLite exports of distributed training, with truth.json"
DESCRIPTION = """\
Simulate data-parallel training (2 epochs of N training and M validation steps by default) and
write one Nsight Systems SQLite export per configuration point, repetition and rank, named like
cifar10.p4.r1.mpi3.sqlite, plus OUTDIR/truth.json with every kernel's per-step time formula and the
expected per-step and per-epoch values. Deterministic per --seed.

GPT mode (--gpt LAYOUT, repeatable): Megatron-style GPT training in parallel layouts, one nsys
export and one Kineto trace per rank (gpt.p8.tp2.pp2.dp2.mbs1.nmb8.zero1.rc0.vpp1.r1.mpi3.sqlite),
truth.json with each layout's step time, critical-path parts and peak memory per GPU; --gpt-truth
adds layouts of any size (64-512 GPUs) whose truth is computed without files. Layout tokens: tp, pp,
dp, mbs (micro-batch size), nmb (micro-batches per step), zero (0-3), rc (0 none, 1 selective,
2 full recomputation), vpp (chunks per stage; > 1 = interleaved schedule).

examples:
  extradeep simulate gpt/ --gpt tp2.pp2.dp2.mbs1.nmb8.zero1 --gpt tp1.pp4.dp2.mbs2.nmb4.rc2 --system dgx-8-nvswitch
  extradeep simulate gpt/ --gpt tp2.pp1.dp2.mbs1.nmb4 --gpt-truth tp8.pp8.dp8.mbs1.nmb32 --gpt-model layers=16,hidden=2048
  extradeep simulate out/ --param ranks=2,4,6,8,10,12,16
  extradeep simulate out/ --param ranks=2,4,8 --param batch=32,64 --scaling weak
  extradeep simulate run/ --param ranks=8 --repetitions 1 --ddp --kernel-scale '*gemm*=0.5'
"""


def add_arguments(parser) -> None:
    parser.add_argument(
        "outdir",
        metavar="OUTDIR",
        help="folder to write the exports and truth.json into (created if missing; files of the "
        "same names are replaced, other files are left alone)",
    )
    parser.add_argument(
        "--app",
        default=None,
        help="application name at the start of every file name (default: cifar10; gpt with --gpt)",
    )
    parser.add_argument(
        "--param",
        action="append",
        metavar="NAME=V1,V2,...",
        help="a parameter and its values; repeat for more parameters (grid = all combinations). "
        "'ranks' is required and sets the files per point; 'batch' is the batch size per rank; "
        "other parameters scale compute linearly (default: ranks=2,4,6,8,10)",
    )
    parser.add_argument(
        "--prefix",
        action="append",
        default=[],
        metavar="NAME=LETTERS",
        help="file-name prefix of a parameter (default: ranks=p, batch=b, else its first letter)",
    )
    parser.add_argument("--repetitions", type=int, default=2, help="repetitions per point (default: 2)")
    parser.add_argument("--epochs", type=int, default=2, help="epochs per run; the first is a warm-up (default: 2)")
    parser.add_argument("--train-steps", type=int, default=5, help="training steps per epoch (default: 5)")
    parser.add_argument("--val-steps", type=int, default=2, help="validation steps per epoch (default: 2)")
    parser.add_argument(
        "--batch", type=int, default=64, help="batch size per rank when 'batch' is not a parameter (default: 64)"
    )
    parser.add_argument(
        "--train-samples", type=int, default=50_000, help="training samples per epoch, D_t (default: 50000)"
    )
    parser.add_argument(
        "--val-samples", type=int, default=10_000, help="validation samples per epoch, D_v (default: 10000)"
    )
    parser.add_argument(
        "--scaling",
        choices=("strong", "weak"),
        default="strong",
        help="strong: fixed dataset, steps per epoch shrink with ranks; weak: dataset grows with ranks (default: strong)",
    )
    parser.add_argument(
        "--layout",
        choices=("2026", "2022"),
        default="2026",
        help="export schema: nsys 2026.2 or the older 2022.1 layout (default: 2026)",
    )
    parser.add_argument(
        "--marks",
        choices=("ranges", "marks", "profiler"),
        default="ranges",
        help="step marks: Extra-Deep NVTX ranges with registered categories, Extra-Deep start/end "
        "marks, or PyTorch ProfilerStep#N ranges (default: ranges)",
    )
    parser.add_argument(
        "--nvtx-strings",
        choices=("text", "textId"),
        default="text",
        help="store NVTX names inline (text) or as registered strings (textId) (default: text)",
    )
    parser.add_argument(
        "--ddp",
        action="store_true",
        help="DDP-like run: 4 all-reduce buckets overlapping backward via event waits, a launch-bound "
        "optimizer, a data-loading gap and rank imbalance",
    )
    parser.add_argument(
        "--kernel-scale",
        action="append",
        default=[],
        metavar="PATTERN=FACTOR",
        help="multiply the time of ops whose name matches the case-insensitive glob PATTERN, "
        "e.g. '*gemm*=0.5' (repeatable)",
    )
    parser.add_argument(
        "--nccl-bandwidth-scale",
        type=float,
        default=1.0,
        help="NCCL bandwidth factor: 2 halves the bandwidth part of collective times (default: 1)",
    )
    parser.add_argument(
        "--cpu-scale",
        type=float,
        default=1.0,
        help="factor on CPU overheads (framework dispatch and CUDA API call durations) (default: 1)",
    )
    parser.add_argument(
        "--buckets",
        type=int,
        default=None,
        help="gradient all-reduce buckets per step; 1 = fused into one collective (default: 2, 4 with --ddp)",
    )
    parser.add_argument(
        "--gradients",
        type=int,
        metavar="N",
        help="with --ddp: N backward layers, one gradient each (AccumulateGrad with shapes in the profiles), "
        "all-reduced in DDP's buckets (--bucket-cap-mb, default 25)",
    )
    parser.add_argument("--bucket-cap-mb", type=float, metavar="MB", help="with --gradients: DDP's bucket_cap_mb")
    parser.add_argument(
        "--gradient-profile",
        choices=("resnet", "uniform"),
        default="resnet",
        help="with --gradients: sizes like a ResNet (first ready largest) or equal, as transformer blocks",
    )
    parser.add_argument(
        "--noise",
        default="0.02,0.01,0.01",
        metavar="INSTANCE,RANK,REP",
        help="lognormal sigma of the multiplicative noise per instance, per rank and per repetition "
        "(default: 0.02,0.01,0.01; 0,0,0 for none)",
    )
    parser.add_argument(
        "--imbalance",
        type=float,
        default=None,
        help="slowest rank's extra compute fraction, ramping over ranks (default: 0.08 with --ddp, else 0)",
    )
    parser.add_argument(
        "--clock-offset",
        type=float,
        default=0.0,
        metavar="NS",
        help="shift each rank's clock by a random offset in [-NS, NS] nanoseconds, as if every rank "
        "had its own nsys session (rank 0 is the reference; offsets go to truth.json) (default: 0)",
    )
    parser.add_argument(
        "--warmup-factor", type=float, default=1.3, help="slow-down of the first (warm-up) epoch (default: 1.3)"
    )
    parser.add_argument(
        "--truth-replicates",
        type=int,
        default=8,
        help="independent noisy runs behind truth.json's 'expected' values (default: 8; 0 to skip)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed; same seed, same files (default: 0)")
    parser.add_argument(
        "--system",
        default=None,
        metavar="PRESET|FILE",
        help="cluster topology: ranks fill nodes of its GPUs per node, the exports carry the layout "
        "(host names, the node's GPUs) and collectives cost alpha-beta on its intra- and "
        "inter-node links; a preset (dgx-8-nvswitch, 4gpu-1nic-per-gpu, 4gpu-1nic) or a TOML "
        "file (default: none, every rank its own host)",
    )
    parser.add_argument(
        "--algorithm",
        choices=("ring", "tree", "hierarchical", "auto", "auto-one-nic"),
        default=None,
        help="collective algorithm with --system (default: ring; with --gpt auto, the faster of ring and tree "
        "per collective as NCCL's tuner picks, its channels crossing nodes through every member's NIC; "
        "auto-one-nic: each ring through one NIC)",
    )
    parser.add_argument(
        "--signals",
        choices=("all", "hostname", "uuids", "export-host", "containers", "elsewhere"),
        default="all",
        help="node signals the exports of --system carry, as real exports of different versions and set-ups: "
        "all (host name, GPU UUIDs, EXPORT_HOST), hostname (TARGET_INFO_SYSTEM_ENV only), uuids (the node's "
        "GPU UUIDs and EXPORT_HOST, no TARGET_INFO_SYSTEM_ENV), export-host (EXPORT_HOST only), containers "
        "(a container per rank on shared nodes), elsewhere (GPU UUIDs, reports exported on a login node); "
        "default: all",
    )
    parser.add_argument(
        "--truth-ranks",
        default="",
        metavar="R1,R2,...",
        help="further rank counts whose truth goes to truth.json (truth_points) without files",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    parser.add_argument(
        "--force",
        action="store_true",
        help="simulate even when the estimated disk or memory need exceeds what is free (checked for "
        "simulations of more than 2,000 rank files)",
    )
    gpt = parser.add_argument_group("GPT mode (parallel layouts)")
    gpt.add_argument(
        "--gpt",
        action="append",
        default=[],
        metavar="LAYOUT",
        help="simulate GPT training in this layout and write its profiles (repeatable), "
        "e.g. tp2.pp2.dp2.mbs1.nmb8.zero1.rc0.vpp1",
    )
    gpt.add_argument(
        "--gpt-truth",
        action="append",
        default=[],
        metavar="LAYOUT",
        help="a layout whose truth goes to truth.json without files (any size; repeatable)",
    )
    gpt.add_argument(
        "--gpt-model",
        default="",
        metavar="KEY=VALUE,...",
        help="the GPT: layers, hidden, heads, seq, vocab (default: layers=8,hidden=1024,heads=16,seq=1024,vocab=51200)",
    )
    gpt.add_argument("--gpu", default="a100-80gb", help="GPU type: a100-80gb, a100-40gb, h100-sxm (default: a100-80gb)")
    gpt.add_argument(
        "--framework",
        choices=("megatron", "deepspeed", "fsdp"),
        default="megatron",
        help="whose markers and process-group names the profiles carry (default: megatron)",
    )
    gpt.add_argument(
        "--nccl-nvtx",
        choices=("payload", "legacy", "none"),
        default="payload",
        help="NCCL's NVTX ranges in the nsys exports: with communicator payloads (NCCL 2.23+), "
        "message size only (older NCCL) or none (default: payload)",
    )
    gpt.add_argument("--formats", default="nsys,kineto", help="nsys and/or kineto (default: nsys,kineto)")
    gpt.add_argument("--steps", type=int, default=4, help="training steps per run, the first a warm-up (default: 4)")
    gpt.add_argument(
        "--no-flows",
        action="store_true",
        help="leave the ac2g flow events out of the Kineto traces (smaller files; readers join launches "
        "to kernels by correlation id)",
    )


def run(args) -> int:
    from extradeep.cli.thin import options_of
    from extradeep.workflows.tools import SimulateOptions, simulate_profiles

    result = simulate_profiles(options_of(SimulateOptions, args, progress=not args.quiet))
    sim = result.simulation
    if result.gpt:
        print(f"wrote {len(sim.files)} profiles of {result.layouts} layout(s) and truth.json to {sim.outdir}")
    else:
        print(f"wrote {len(sim.files)} exports, truth.json and extradeep.toml to {sim.outdir}")
    return 0
