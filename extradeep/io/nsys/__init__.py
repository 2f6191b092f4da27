"""Nsight Systems SQLite exports: read-only access, schema probing, raw events, steps and per-step sums."""
