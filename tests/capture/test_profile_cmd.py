"""extradeep profile-cmd: the generated scripts run under bash with stand-in launchers and nsys,
and leave exactly the exports the reader's file-name convention expects."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from extradeep.capture.frameworks.sampling import Sampling
from extradeep.capture.profile_cmd import ProfilePlan
from extradeep.cli import main
from extradeep.errors import InputError
from extradeep.io.discover import parse_name

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")

# Stand-ins: each launcher starts N processes with its rank variable; nsys profile expands
# %q{VAR} in --output, runs the command and writes a report; nsys export copies it.
FAKE_TOOLS = {
    "srun": """
n=1; while [[ $1 == --* ]]; do case $1 in --ntasks=*) n=${1#--ntasks=};; esac; shift; done
for ((i = 0; i < n; i++)); do SLURM_PROCID=$i "$@"; done
""",
    "mpirun": """
n=1; while [[ $1 == -* ]]; do case $1 in -np) n=$2; shift;; -x) shift;; esac; shift; done
for ((i = 0; i < n; i++)); do OMPI_COMM_WORLD_RANK=$i "$@"; done
""",
    "torchrun": """
n=1; while [[ $1 == --* ]]; do case $1 in --nproc-per-node=*) n=${1#--nproc-per-node=};; esac; shift; done
for ((i = 0; i < n; i++)); do RANK=$((${SLURM_PROCID:-0} * n + i)) "$@"; done
""",
    "scontrol": "seq -f node%g 1 20000\n",  # more than a pipe buffer: head -n 1 would SIGPIPE it
    "nsys": """
if [[ $1 == profile ]]; then
  shift; while [[ $1 == --* ]]; do case $1 in --output=*) out=${1#--output=};; esac; shift; done
  var=${out#*%q\\{}; var=${var%\\}}; out=${out%%\\%q*}${!var}
  "$@"
  if [[ -z $NO_CAPTURE ]]; then echo "report of rank ${!var}" > "$out.nsys-rep"; fi
elif [[ $1 == export ]]; then
  for arg in "$@"; do case $arg in --output=*) out=${arg#--output=};; esac; done
  cp "${@: -1}" "$out"
fi
""",
}

# The training command: logs its arguments and EXTRADEEP_* environment, one line per process.
RECORDER = """#!/bin/bash
echo "$*|$(env | grep '^EXTRADEEP_' | sort | tr '\\n' ' ')" >> "$RECORD_LOG"
"""


@pytest.fixture
def workdir(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in FAKE_TOOLS.items():
        (bin_dir / name).write_text("#!/bin/bash\nset -e\n" + body)
        (bin_dir / name).chmod(0o755)
    (tmp_path / "record.sh").write_text(RECORDER)
    return tmp_path


def run_script(workdir: Path, script: str, returncode=0, **env):
    (workdir / "job.sh").write_text(script)
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("EXTRADEEP_", "SLURM_", "RANK"))}
    environ.update(PATH=f"{workdir / 'bin'}{os.pathsep}{environ['PATH']}", RECORD_LOG=str(workdir / "log.jsonl"), **env)
    done = subprocess.run(["bash", "job.sh"], cwd=workdir, env=environ, capture_output=True, text=True, timeout=60)
    assert done.returncode == returncode, done.stderr
    if returncode:
        return done.stderr
    log = workdir / "log.jsonl"
    calls = []
    for line in log.read_text().splitlines() if log.exists() else []:
        argv, env = line.split("|")
        calls.append({"argv": argv, "env": dict(item.split("=", 1) for item in env.split())})
    return calls


def exports(workdir: Path):
    return sorted(p.name for p in (workdir / "profiles").glob("*.sqlite"))


def plan(**changes):
    settings = dict(
        app="cifar10",
        command=["bash", "record.sh", "--batch", "{b}", "--tag", "p{ranks} r{rep}"],
        ranks=[2, 4],
        reps=2,
        params={"b": ["32", "64"]},
    )
    return ProfilePlan(**{**settings, **changes})


@pytest.mark.parametrize("launcher", ["srun", "mpirun", "torchrun"])
def test_shell_script_runs_every_configuration_and_names_files_for_the_reader(workdir, launcher):
    calls = run_script(workdir, plan(launcher=launcher).to_sh())
    expected = sorted(
        f"cifar10.p{p}.b{b}.r{r}.mpi{k}.sqlite" for p in (2, 4) for b in (32, 64) for r in (1, 2) for k in range(p)
    )
    assert exports(workdir) == expected
    for name in expected:
        parsed = parse_name(name)
        assert f"report of rank {parsed['rank']}" in (workdir / "profiles" / name).read_text()
        assert parsed["ranks"] in (2, 4) and parsed["b"] in (32, 64) and parsed["rep"] in (1, 2)
    assert len(calls) == len(expected)  # one process per rank and run
    assert {c["argv"] for c in calls} == {
        f"--batch {b} --tag p{p} r{r}" for p in (2, 4) for b in ("32", "64") for r in (1, 2)
    }
    assert calls[0]["env"] == {
        "EXTRADEEP_NVTX": "1",
        "EXTRADEEP_TRAIN_STEPS": "5",
        "EXTRADEEP_VAL_STEPS": "2",
        "EXTRADEEP_EPOCHS": "2",
        "EXTRADEEP_SAMPLING": "truncate",
    }


def test_slurm_array_runs_one_configuration_per_task(workdir):
    script = plan(sampling=Sampling(3, 1, 2, "stop", True), cuda_profiler=True).to_slurm(["--time=00:20:00"])
    assert "#SBATCH --array=0-7" in script and "#SBATCH --ntasks=4" in script and "#SBATCH --time=00:20:00" in script
    assert "--capture-range=cudaProfilerApi --capture-range-end=stop" in script
    for task in range(8):
        calls = run_script(workdir, script, SLURM_ARRAY_TASK_ID=str(task), SLURM_JOB_NODELIST="node[001-002]")
    assert len(exports(workdir)) == 2 * 2 * (2 + 4)
    assert {c["argv"] for c in calls} == {
        f"--batch {b} --tag p{p} r{r}" for p in (2, 4) for b in ("32", "64") for r in (1, 2)
    }
    assert calls[0]["env"]["EXTRADEEP_CUDA_PROFILER"] == "1" and calls[0]["env"]["EXTRADEEP_SAMPLING"] == "stop"


def test_torchrun_slurm_array_spans_nodes(workdir):
    script = plan(launcher="torchrun", ranks=[2, 8], reps=1, params={"b": ["16"]}).to_slurm()
    assert "#SBATCH --nodes=2" in script and '--rdzv-endpoint="$MASTER_ADDR:29500"' in script
    assert "--trace=cuda,nvtx,osrt,cudnn,cublas " in script  # no MPI tracing for torchrun
    for task in range(2):
        run_script(workdir, script, SLURM_ARRAY_TASK_ID=str(task), SLURM_JOB_NODELIST="node[001-002]")
    # srun starts one torchrun per node (SLURM_PROCID = node), each starting --nproc-per-node ranks
    assert exports(workdir) == sorted(
        ["cifar10.p2.b16.r1.mpi0.sqlite", "cifar10.p2.b16.r1.mpi1.sqlite"]
        + [f"cifar10.p8.b16.r1.mpi{k}.sqlite" for k in range(8)]
    )


def test_a_run_without_reports_stops_the_script_with_a_hint(workdir):
    stderr = run_script(workdir, plan(cuda_profiler=True).to_sh(), returncode=1, NO_CAPTURE="1")
    assert stderr.strip() == (
        "extradeep: nsys wrote no reports profiles/cifar10.p2.b32.r1.mpi*.nsys-rep "
        "(nsys records only after cudaProfilerStart: use an extradeep helper)"
    )
    assert not list((workdir / "profiles").glob("*"))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"command": []}, "training command"),
        ({"ranks": [0, 2]}, "--ranks"),
        ({"params": {"p": ["2"]}}, "--param 'p'"),
        ({"params": {"b": ["big"]}}, "must be numbers"),
        ({"app": "my.app"}, "no dots"),
        ({"command": ["python", "t.py", "{lr}"]}, "{lr}"),
        ({"launcher": "torchrun", "ranks": [6]}, "do not fill nodes"),
        ({"launcher": "torchrun", "gpus_per_node": 0}, "--gpus-per-node must be at least 1"),
    ],
)
def test_bad_plans_are_one_line_input_errors(changes, message):
    with pytest.raises(InputError, match=message.replace("{", r"\{").replace("}", r"\}")):
        plan(**changes)


def test_cli_prints_the_script(capsys):
    assert (
        main(
            [
                "profile-cmd",
                "--app",
                "resnet",
                "--ranks",
                "2,4,6,8,10",
                "--reps",
                "2",
                "--cuda-profiler",
                "--",
                "python",
                "train.py",
            ]
        )
        == 0
    )
    script = capsys.readouterr().out
    assert script.startswith("#!/bin/bash\n") and script.count("# run ") == 10
    assert '--output="profiles/resnet.p10.r2.mpi%q{SLURM_PROCID}"' in script
    assert "nsys export --type=sqlite" in script and "EXTRADEEP_CUDA_PROFILER=1" in script
    assert main(["profile-cmd", "--ranks", "2,,4", "--", "python", "t.py"]) == 2
    assert "--ranks: empty value" in capsys.readouterr().err


def test_a_plan_from_the_advisor_becomes_jobs_in_one_step(workdir, capsys):
    """extradeep plan -> plan file -> profile-cmd --plan -> script -> exports named for the reader."""
    from extradeep.analysis.advisor import MeasurementAdvisor
    from extradeep.capture.plan_file import read_plan, write_plan

    advisor = MeasurementAdvisor(64, 16, gpus_per_node=4, budget_gpu_hours=12).fit()
    advisor.fixed_ = {"b": 64.0}  # a fixed parameter of the experiment travels into the file names
    proposal = advisor.propose()
    path = write_plan(workdir / "plan.csv", proposal, app="cifar10")
    planned = read_plan(path)
    assert planned.app == "cifar10" and planned.params == {"b": ["64"]}
    assert len(planned.runs) == proposal["reps"].sum()
    assert main(["profile-cmd", "--plan", str(path), "--", "bash", "record.sh", "--tag", "p{ranks} r{rep}"]) == 0
    script = capsys.readouterr().out
    run_script(workdir, script)
    expected = sorted(f"cifar10.p{r.ranks}.b64.r{r.rep}.mpi{k}.sqlite" for r in planned.runs for k in range(r.ranks))
    assert exports(workdir) == expected


def test_plan_file_problems_are_one_line_each(tmp_path, capsys):
    from extradeep.capture.plan_file import read_plan

    bad = tmp_path / "plan.csv"
    bad.write_text("app,ranks,reps,first_rep\ncifar10,8,2,1\ncifar10,x,2,1\n")
    planned = read_plan(bad)
    assert [r.ranks for r in planned.runs] == [8, 8] and "line 3" in planned.problems[0]
    (tmp_path / "other.csv").write_text("path,rank\na,1\n")
    with pytest.raises(InputError, match="not a plan file"):
        read_plan(tmp_path / "other.csv")
    assert main(["profile-cmd", "--plan", str(tmp_path / "missing.csv"), "--", "python", "t.py"]) == 2
    err = capsys.readouterr().err
    assert "missing.csv" in err and len(err.strip().splitlines()) == 1
    assert main(["profile-cmd", "--", "python", "t.py"]) == 2
    assert "--ranks" in capsys.readouterr().err
