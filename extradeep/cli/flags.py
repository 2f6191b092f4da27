"""Library field names as command-line flags: the library names what was wrong by its own argument
names (``train_samples``); the CLI shows the flag that sets it (``--train-samples``)."""

from __future__ import annotations

from extradeep.errors import InputError

# fields whose flag is not simply --field-name
FIELD_FLAGS = {
    "batch_per_rank": "--batch-size",
    "eval_experiment": "--eval-dir",
    "budget_gpu_hours": "--budget",  # plan --layout-model (extradeep.layouts.design)
    "max_gpus": "--max-ranks",
}


def flag_of(field: str) -> str:
    return FIELD_FLAGS.get(field, "--" + field.replace("_", "-"))


def flag_error(exc: InputError) -> InputError:
    """The same error, naming the flag instead of the library's field (unchanged without a field, or
    when it names a file: a value from a settings file is named by the file and its key where
    :class:`extradeep.pipeline.Options` checks it)."""
    if exc.field is None or exc.source is not None:
        return exc
    return InputError(flag_of(exc.field), exc.problem)
