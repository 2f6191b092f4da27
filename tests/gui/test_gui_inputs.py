"""The GUI opens inputs as the command line does (items 13-14 of issue 17): a folder with its
extradeep.toml, and bad files listed where they stay visible without blocking the good ones."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")


def test_a_folder_opens_exactly_as_extradeep_model_opens_it(
    window, open_wait, sample_profiles, gui_experiment, tmp_path
):
    from extradeep.cli import main
    from extradeep.gui.tabs.scaling_tab import scaling_frame

    out = tmp_path / "model.json"
    assert main(["model", str(sample_profiles), "--predict", "64", "--json", str(out)]) == 0
    cli = json.loads(out.read_text())
    open_wait(window, sample_profiles)
    assert window.last_error == "" and window.ws.per == "epoch"  # the folder's dataset sizes apply
    epoch = next(a for a in cli["application"] if a["quantity"] == "epoch time")
    assert window.app_models.model("epoch time").formula() == epoch["model"]["formula"]
    view = window.current_view()
    assert view.x_range()[1] >= 64
    table = scaling_frame(view, "strong")
    shown = table[table["series"].str.startswith("application") & (table["ranks"] == 64)]["speedup"]
    expected = next(p for p in cli["predictions"] if p["quantity"] == "epoch time")["speedup"]
    assert expected > 1  # strong scaling on a fixed dataset: faster with more ranks
    assert shown.iloc[0] == pytest.approx(expected, rel=1e-9)


def test_bad_files_are_listed_where_they_stay_and_block_nothing(
    window, open_wait, sample_profiles, gui_experiment, tmp_path
):
    """A corrupt file under a valid run name and a stray corrupt file: the folder still opens, and both
    are listed in the problems dock (not only in a passing status message), with no CLI flag wording."""
    folder = tmp_path / "with_bad_files"
    folder.mkdir()
    exports = sorted(sample_profiles.glob("*.sqlite"))
    corrupt = exports[3]
    for export in exports:
        if export != corrupt:
            (folder / export.name).symlink_to(export)
    (folder / corrupt.name).write_bytes(b"not an export")
    (folder / "broken.sqlite").write_bytes(b"")
    open_wait(window, folder)
    assert window.last_error == "" and window.ws is not None and window.ws.models
    shown = window.problems.problems
    assert any(corrupt.name in line for line in shown) and any("broken.sqlite" in line for line in shown)
    assert window.problems.isVisible() and window.problems.button.isVisible()
    assert str(len(shown)) in window.problems.button.text()
    window.problems.close()  # closed by the user, it comes back from the status bar
    window.problems.button.click()
    assert window.problems.isVisible()
    assert not any("--manifest" in line for line in shown)


@pytest.mark.real
def test_a_single_kineto_trace_file_is_read_as_a_profile(window, open_wait, real_kineto):
    """One PyTorch profiler trace (not a folder) is read as `extradeep model FILE` reads it (before:
    'not an experiment saved by extradeep'). One file is one configuration, so, as on the command
    line, what stops it is the missing parameter to model, named on one line."""
    path = real_kineto("HTA__trace_diff_test_test.json.gz")
    open_wait(window, path)
    assert "no modeled parameters" in window.last_error and "saved by extradeep" not in window.last_error
