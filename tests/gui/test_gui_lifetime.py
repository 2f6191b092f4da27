"""The GUI, its command and its worker processes stop together: SIGTERM or SIGINT to `extradeep gui`
ends every process it started within 8 s, with no traceback and no leaked semaphore."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

SAMPLE_PROFILES = Path(__file__).resolve().parents[2] / "sample_profiles"
GUI = [sys.executable, "-c", "import sys; from extradeep.cli import main; sys.exit(main(['gui', *sys.argv[1:]]))"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_command_stops_every_process(process_tree, tmp_path, signum):
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")  # the window's settings stay in the test
    tree = process_tree([*GUI, str(SAMPLE_PROFILES)], env=env)
    tree.wait_for_descendants(3)  # the forkserver, the resource tracker and a worker: the GUI works
    time.sleep(1.0)
    tree.descendants()
    tree.proc.send_signal(signum)
    stopped = time.monotonic()
    assert tree.proc.wait(timeout=8) == 128 + signum
    err = tree.proc.stderr.read()
    assert not tree.living_after(8.0 - (time.monotonic() - stopped)), err
    assert "Traceback" not in err and "leaked" not in err, err
