"""The size of a simulation, estimated before it runs (extradeep/simulate/size.py), against what a
real simulation writes; a simulation larger than the machine is refused in one line, before any file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from extradeep.cli import main
from extradeep.simulate.size import check_room, estimate, rank_files

SETTINGS = dict(epochs=2, train_steps=3, val_steps=1, truth_replicates=0, progress=False)


@pytest.mark.parametrize("ddp", [False, True])
def test_the_estimate_matches_what_a_simulation_writes(tmp_path, ddp):
    """Estimated, then simulated, in one fresh process as `extradeep simulate` does."""
    params = {"ranks": [4, 12]}
    code = (
        "import resource, sys\n"
        "from extradeep.simulate import simulate\n"
        "from extradeep.simulate.size import estimate\n"
        f"size = estimate({params!r}, repetitions=1, pilot_from=0, ddp={ddp}, **{SETTINGS!r})\n"
        f"simulate(sys.argv[1], params={params!r}, repetitions=1, ddp={ddp}, **{SETTINGS!r})\n"
        "print(size.files, size.disk_bytes, size.memory_bytes)\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "sim")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    estimated, peak = done.stdout.strip().splitlines()[-2:]
    n_files, disk_bytes, memory_bytes = (float(v) for v in estimated.split())
    files = [p for p in (tmp_path / "sim").iterdir() if p.suffix == ".sqlite"]
    written = sum(p.stat().st_size for p in files)
    assert n_files == len(files) == 16
    assert 0.9 < disk_bytes / written < 1.1
    assert memory_bytes >= int(peak)  # an upper bound: never an underestimate


def test_rank_files_count_every_rank_of_every_run():
    assert rank_files({"ranks": [2, 4], "batch": [32, 64, 128]}, repetitions=2) == ((2 + 4) * 3 * 2, 4)


def test_a_simulation_beyond_the_machine_is_refused_before_any_file(tmp_path, capsys):
    out = tmp_path / "huge"
    assert main(["simulate", str(out), "--param", "ranks=100000000", "--repetitions", "1", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "this simulation needs 100,000,000 files" in err[0] and "--force" in err[0], err
    assert not out.exists() or not any(out.iterdir())


def test_small_simulations_skip_the_pilot(tmp_path):
    assert estimate({"ranks": [2, 4]}, repetitions=2) is None
    check_room(None, tmp_path)  # nothing to check


def test_room_is_checked_on_the_folders_disk(tmp_path):
    from extradeep.errors import InputError
    from extradeep.simulate.size import SimulationSize

    with pytest.raises(InputError, match="free on disk"):
        check_room(SimulationSize(files=1, disk_bytes=1e18, memory_bytes=1.0), Path(tmp_path) / "new" / "deeper")
