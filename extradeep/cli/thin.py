"""Parsed flags -> a workflow's options value: the flags are named as the options' fields (--train-steps
sets train_steps), so a command fills its options by name and the library checks them once."""

from __future__ import annotations

import argparse
import dataclasses


def options_of(kind, args: argparse.Namespace, **given):
    """`kind` (an options dataclass) from the flags of the same names; `given` sets the others."""
    names = [f.name for f in dataclasses.fields(kind) if f.init and f.name not in given]
    return kind(**{name: getattr(args, name) for name in names if hasattr(args, name)}, **given)
