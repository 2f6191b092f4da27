"""One profile in, whatever its format: the dispatch to the nsys or the Kineto reader by the file's content.

`read_once` is the per-file pass of a batch (`extradeep.io.execute.read_one`): it opens the file once
and returns everything later steps need (`extradeep.io.frames.ProfileRead`: the per-step sums, the
rank's placement and, when asked, the replay's frames). `read_profile` (the per-step sums) and
`read_replay_frames` (the replay's frames, for `extradeep.predictor.trace.load_trace`) are that pass
for one purpose each.
"""

from __future__ import annotations

import pandas as pd

from extradeep.errors import InputError
from extradeep.io.formats import KINETO, profile_format
from extradeep.io.frames import ProfileRead
from extradeep.io.placement import empty_placement


def read_once(path, settings=None, *, replay: bool = False) -> ProfileRead:
    """One pass over one profile (one SQLite connection, or one parse of a trace): its per-step sums
    (`frame.attrs["format"]` says which reader read them), placement and, with `replay`, the frames
    the exposure replay needs. Raises InputError naming the file for unusable input."""
    fmt = profile_format(path)
    if fmt == KINETO:
        from extradeep.io.kineto.read import read_trace_once as read
    else:
        from extradeep.io.nsys.read import read_export_once as read
    found = read(path, settings, replay=replay)
    found.frame.attrs["format"] = fmt
    if found.placement is None:  # a format that names no host
        found.placement = empty_placement()
    if found.replay is not None:
        found.replay["placement"] = found.placement
    return found


def read_profile(path, settings=None) -> pd.DataFrame:
    """Per-step sums of one profile (see `extradeep.io.nsys.read.read_export` for the frame), with
    `attrs["format"]` saying which reader read it."""
    return read_once(path, settings).frame


def read_replay_frames(path, settings=None) -> dict:
    """The replay's raw frames of one profile, keyed by process id (`extradeep.io.replay.FRAME_KEYS`),
    without the per-step sums (a run without step marks still replays); `settings`: the reader's step
    conventions. A full replay (`extradeep.predict`) reads its files with this."""
    if profile_format(path) == KINETO:
        from extradeep.io.kineto.replay import read_replay
    else:
        from extradeep.io.nsys.replay import read_replay
    frames = read_replay(path, settings)
    if frames["placement"] is None:
        frames["placement"] = empty_placement()
    return frames


def read_placement(path) -> dict:
    """The node signals of one profile of either format (keys of
    :data:`extradeep.io.placement.PLACEMENT_COLUMNS`); every key None for a file that cannot be read.
    For a caller that needs only the placement: the per-file pass (`read_once`) keeps it already."""
    try:
        fmt = profile_format(path)
        if fmt == KINETO:
            from extradeep.io.kineto.placement import read_placement as kineto_placement

            return kineto_placement(path)
    except InputError:
        return empty_placement()
    from extradeep.io.nsys.layout import read_placement as nsys_placement

    return nsys_placement(path)
