"""`extradeep simulate OUTDIR`: write simulated Nsight Systems exports with known ground truth."""

from __future__ import annotations

from pathlib import Path

HELP = "write simulated Nsight Systems SQLite exports of distributed training, with truth.json"
DESCRIPTION = """\
Simulate data-parallel training (2 epochs of N training and M validation steps by default) and
write one Nsight Systems SQLite export per configuration point, repetition and rank, named like
cifar10.p4.r1.mpi3.sqlite, plus OUTDIR/truth.json with every kernel's per-step time formula and the
expected per-step and per-epoch values. Deterministic per --seed.

examples:
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
        "--app", default="cifar10", help="application name at the start of every file name (default: cifar10)"
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
        choices=("ring", "tree", "hierarchical"),
        default="ring",
        help="all-reduce algorithm with --system (default: ring)",
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


def _pairs(items, what: str, convert) -> dict:
    from extradeep.errors import InputError

    out = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise InputError(None, f"{what} {item!r} must look like NAME=VALUE")
        if name.strip() in out:
            raise InputError(None, f"{what} {name.strip()} is given twice; give it once with every value")
        try:
            out[name.strip()] = convert(value.strip())
        except ValueError:
            raise InputError(None, f"{what} {item!r}: cannot read {value!r}") from None
    return out


def _numbers(text: str) -> list:
    return [int(v) if float(v).is_integer() else float(v) for v in text.split(",") if v.strip()]


def _check_outdir(outdir: Path) -> None:
    """Refuse a folder that holds exports the simulator did not write: it would overwrite them."""
    from extradeep.errors import InputError

    if outdir.exists() and not outdir.is_dir():
        raise InputError(outdir, "exists and is not a folder")
    if outdir.is_dir() and not (outdir / "truth.json").exists() and any(outdir.glob("*.sqlite")):
        raise InputError(
            outdir, "already holds .sqlite files that extradeep did not simulate; choose an empty or new folder"
        )
    from extradeep.cli.outputs import check_writable

    check_writable(None, outdir, outdir.resolve(), may_create=True)


def run(args) -> int:
    from extradeep.errors import InputError
    from extradeep.simulate import simulate

    params = _pairs(args.param, "--param", _numbers) or None
    try:
        noise = tuple(float(v) for v in args.noise.split(","))
    except ValueError:
        raise InputError(None, f"--noise {args.noise!r} must be three numbers like 0.02,0.01,0.01") from None
    if len(noise) != 3 or min(noise) < 0:
        raise InputError(None, f"--noise {args.noise!r} must be three non-negative numbers")
    _check_outdir(Path(args.outdir))
    settings = dict(
        app=args.app,
        params=params,
        prefixes=_pairs(args.prefix, "--prefix", str),
        repetitions=args.repetitions,
        epochs=args.epochs,
        train_steps=args.train_steps,
        val_steps=args.val_steps,
        batch=args.batch,
        train_samples=args.train_samples,
        val_samples=args.val_samples,
        scaling=args.scaling,
        layout=args.layout,
        marks=args.marks,
        nvtx_strings=args.nvtx_strings,
        ddp=args.ddp,
        kernel_scale=_pairs(args.kernel_scale, "--kernel-scale", float),
        nccl_bandwidth_scale=args.nccl_bandwidth_scale,
        cpu_scale=args.cpu_scale,
        buckets=args.buckets,
        noise=noise,
        seed=args.seed,
        warmup_factor=args.warmup_factor,
        imbalance=args.imbalance,
        clock_offset_ns=args.clock_offset,
        truth_replicates=args.truth_replicates,
        topology=args.system,
        algorithm=args.algorithm,
        truth_ranks=_numbers(args.truth_ranks),
        progress=not args.quiet,
    )
    if not args.force:  # a million ranks would fill the disk and the memory: say so before, in one line
        from extradeep.simulate.size import check_room, estimate

        check_room(estimate(**settings), args.outdir)
    sim = simulate(args.outdir, **settings)
    print(f"wrote {len(sim.files)} exports, truth.json and extradeep.toml to {sim.outdir}")
    return 0
