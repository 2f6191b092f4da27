"""Library field names as command-line flags: the library names what was wrong by its own argument
names (``train_samples``); the CLI shows the flag that sets it (``--train-samples``)."""

from __future__ import annotations

from extradeep.errors import InputError

# fields whose flag is not simply --field-name
FIELD_FLAGS = {"batch_per_rank": "--batch-size", "eval_experiment": "--eval-dir"}


def flag_of(field: str) -> str:
    return FIELD_FLAGS.get(field, "--" + field.replace("_", "-"))


def flag_error(exc: InputError, args=None) -> InputError:
    """The same error, naming the flag instead of the library's field (unchanged without a field),
    or the settings file and its key where the value came from there (`args.config_keys`)."""
    if exc.field is None or exc.source is not None:
        return exc
    flag = flag_of(exc.field)
    in_file = [key for key in getattr(args, "config_keys", None) or () if flag_of(key) == flag]
    if in_file:
        return InputError(args.config, f"{in_file[0].replace('_', '-')}: {exc.problem}")
    return InputError(flag, exc.problem)
