"""Capturing profiles: NVTX marks, framework helpers, the source instrumenter and the nsys job writer."""
