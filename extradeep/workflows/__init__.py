"""The commands' work as library functions (issue 22 item 2): one call per CLI command.

Each `extradeep <command>` parses its flags into one options value, makes one call here and only
formats what comes back; the GUI calls the same functions. A workflow resolves and checks its
options once (errors name the option), does the reading, modeling and analysis, and returns a
result dataclass of dataframes and fitted models; it prints nothing and writes only the outputs
it is asked for.
"""

from __future__ import annotations

import importlib

from extradeep import _EXPORTS as _ROOT_EXPORTS

# the workflows' public names, as the package root lists them (one list); imported when first used,
# so `extradeep --help` stays fast
_EXPORTS = {name: module for name, module in _ROOT_EXPORTS.items() if module.startswith("extradeep.workflows.")}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'extradeep.workflows' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
