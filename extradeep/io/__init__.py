"""Reading profiles: discovery of runs, the Nsight Systems reader, the per-file cache and the saved-experiment format.

Everything here reads user files read-only and returns pandas DataFrames; nothing here models or analyses.
"""
