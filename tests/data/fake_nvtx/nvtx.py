"""A stand-in for the `nvtx` package that records push/pop calls instead of talking to a profiler.

Loaded in-process by tests/frameworks/conftest.py, or put on PYTHONPATH of a subprocess; there,
with EXTRADEEP_FAKE_NVTX_LOG set, every call is also appended to that file as one JSON line.
"""

import json
import os
import threading
import time

CALLS = []  # (op, message, domain, time_ns, thread_id); op is "push" or "pop"


def _record(op, message, domain):
    call = (op, message, domain, time.perf_counter_ns(), threading.get_native_id())
    CALLS.append(call)
    log = os.environ.get("EXTRADEEP_FAKE_NVTX_LOG")
    if log:
        with open(log, "a") as out:
            out.write(json.dumps(call) + "\n")


def push_range(message=None, color=None, domain=None, category=None, payload=None):
    _record("push", message, domain)


def pop_range(domain=None):
    _record("pop", None, domain)


def ranges(calls=None):
    """Closed ranges (name, domain, start_ns, end_ns, thread) in push order; raises if unbalanced."""
    stacks, done = {}, []
    for op, message, domain, time_ns, thread in CALLS if calls is None else calls:
        stack = stacks.setdefault((thread, domain), [])
        if op == "push":
            stack.append(len(done))
            done.append([message, domain, time_ns, None, thread])
        elif not stack:
            raise AssertionError(f"pop without push in domain {domain!r}")
        else:
            done[stack.pop()][3] = time_ns
    open_ranges = [name for name, _, _, end, _ in done if end is None]
    if open_ranges:
        raise AssertionError(f"ranges left open: {open_ranges}")
    return [tuple(r) for r in done]


def nested_names(calls=None):
    """["epoch 0", "epoch 0/train_step 0", ...]: each range under its enclosing ranges, push order."""
    ranges(calls)  # balance check
    stacks, names = {}, []
    for op, message, domain, _, thread in CALLS if calls is None else calls:
        stack = stacks.setdefault((thread, domain), [])
        if op == "push":
            stack.append(message)
            names.append("/".join(stack))
        else:
            stack.pop()
    return names


def sampled_names(epochs, train, val):
    """nested_names() of `epochs` epochs with `train` training then `val` validation steps each."""
    names = []
    for e in range(epochs):
        names += [f"epoch {e}"] + [f"epoch {e}/train_step {i}" for i in range(train)]
        names += [f"epoch {e}/val_step {i}" for i in range(val)]
    return names
