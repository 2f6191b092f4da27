"""extradeep: performance models of distributed deep-learning training from a few Nsight Systems profiles.

The public API lives in the submodules; the names re-exported here are the stable entry points that
the CLI and the GUI use.
"""

__version__ = "0.1.0"
