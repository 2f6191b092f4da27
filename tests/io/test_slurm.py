"""The Slurm recipe without Slurm: the options of `--scheduler slurm` ([slurm] in extradeep.toml)
reach dask-jobqueue's SLURMCluster, checked in the job script it would submit."""

import argparse
import sys

import pytest

pytest.importorskip("dask_jobqueue")

from extradeep.cli.common import add_reading_arguments, resolve_options  # noqa: E402
from extradeep.errors import InputError  # noqa: E402
from extradeep.io.cluster import SlurmOptions, scheduler_from_options  # noqa: E402


def _options_from_config(tmp_path, text, *argv):
    config = tmp_path / "extradeep.toml"
    config.write_text(text)
    parser = argparse.ArgumentParser()
    add_reading_arguments(parser)
    return resolve_options(parser.parse_args([str(tmp_path), "--config", str(config), *argv]))


def test_slurm_table_becomes_the_job_script(tmp_path):
    options = _options_from_config(
        tmp_path,
        (
            'scheduler = "slurm"\n[slurm]\nqueue = "cpu"\naccount = "proj42"\ncores = 8\nmemory = "32GB"\n'
            'walltime = "02:30:00"\njobs = 3\njob-extra = ["--constraint=ssd"]\n'
        ),
    )
    slurm = scheduler_from_options(options)
    assert slurm == SlurmOptions(
        queue="cpu",
        account="proj42",
        cores=8,
        memory="32GB",
        walltime="02:30:00",
        jobs=3,
        job_extra=("--constraint=ssd",),
    )
    cluster = slurm.cluster()
    try:
        script = cluster.job_script()
    finally:
        cluster.close()
    lines = script.splitlines()
    for line in (
        "#SBATCH -p cpu",
        "#SBATCH -A proj42",
        "#SBATCH --cpus-per-task=8",
        "#SBATCH -t 02:30:00",
        "#SBATCH --constraint=ssd",
    ):
        assert line in lines
    assert any(line.startswith("#SBATCH --mem=") for line in lines)
    worker = next(line for line in lines if "distributed.cli.dask_worker" in line)
    # reading is single-threaded Python: one worker process per core, one thread each
    assert "--nworkers 8" in worker and "--nthreads 1" in worker
    assert worker.startswith(sys.executable)


def test_the_command_line_scheduler_wins_and_defaults_hold(tmp_path):
    options = _options_from_config(tmp_path, "[slurm]\ncores = 2\n", "--scheduler", "slurm")
    slurm = scheduler_from_options(options)
    assert slurm.cores == 2 and slurm.cluster_arguments()["processes"] == 2 and slurm.jobs == 1
    options = _options_from_config(tmp_path, 'scheduler = "slurm"\n', "--scheduler", "tcp://10.0.0.1:8786")
    assert scheduler_from_options(options) == "tcp://10.0.0.1:8786"


@pytest.mark.parametrize(
    "table, fragment",
    [
        ({"partition": "gpu"}, "unknown key(s) partition"),
        ({"cores": 0}, "slurm.cores: must be a whole number >= 1"),
        ({"cores": 4, "processes": 8}, "slurm.processes: must be a whole number from 1 to cores"),
        ({"walltime": "two hours"}, "slurm.walltime: must look like HH:MM:SS"),
    ],
)
def test_bad_slurm_options_are_one_line(table, fragment):
    with pytest.raises(InputError) as caught:
        SlurmOptions.from_dict(table)
    assert fragment in str(caught.value) and "\n" not in str(caught.value)
