"""`extradeep inspect` on a batch of damaged profiles: one line per file, then the summary."""

from __future__ import annotations

import gzip

from shared_data import REPO

from extradeep.cli import main


def test_a_folder_where_no_profile_is_readable_is_summarised(tmp_path, capsys):
    """With every file damaged the summary line was once left out (only the per-file errors showed)."""
    shipped = sorted((REPO / "sample_profiles" / "layouts" / "profiles").glob("*.pt.trace.json.gz"))[:3]
    for trace in shipped:  # named as the shipped traces, holding JSON without their traceEvents
        (tmp_path / trace.name).write_bytes(gzip.compress(b"{}"))
    assert main(["inspect", str(tmp_path), "--top", "0"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if "traceEvents" in line] == err[:3] and len(err) == 4
    assert all(trace.name in line for trace, line in zip(shipped, err))
    assert err[-1] == "extradeep: 3 of 3 file(s) could not be read"
