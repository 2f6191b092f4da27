"""Reading profiles: discovery of runs, the input formats (Nsight Systems exports, PyTorch Kineto traces) and the
dispatch between them, the per-file cache and the saved-experiment format.

Everything here reads user files read-only and returns pandas DataFrames; nothing here models or analyses.
"""
