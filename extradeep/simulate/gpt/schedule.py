"""The order in which one pipeline stage runs its forward and backward passes and its point-to-point calls.

Actions of one stage in one training step, as Megatron-LM's schedules issue them:
- ``("fwd", chunk, mb)`` / ``("bwd", chunk, mb)``: a pass of the stage's model chunk over a micro-batch;
- ``("p2p", call, sends, recvs)``: one grouped NCCL call (``call`` is Megatron's function name, such as
  ``send_forward_recv_backward``) with the transfers it sends and receives. A transfer is
  ``("F", g, mb)`` (activations leaving global chunk g towards g + 1) or ``("B", g, mb)`` (gradients
  leaving global chunk g towards g - 1); global chunk g = chunk * pp + stage.

1F1B (PipeDream-flush): pp - stage - 1 warm-up forwards, then one forward and one backward in turn,
then the remaining backwards. Interleaved (Narayanan et al., SC'21): each stage holds v chunks;
micro-batches go through the chunks in groups of pp, with (pp - stage - 1) * 2 + (v - 1) * pp
warm-up forwards. The order of the calls is what makes the schedule deadlock-free; the causal
scheduler (:mod:`.dag`) finds the bubbles.
"""

from __future__ import annotations


def one_f_one_b(stage: int, pp: int, m: int) -> list[tuple]:
    first, last = stage == 0, stage == pp - 1
    warmup = min(pp - stage - 1, m)
    remaining = m - warmup
    acts: list[tuple] = []

    def recv_fwd(mb):
        return [] if first else [("F", stage - 1, mb)]

    def send_fwd(mb):
        return [] if last else [("F", stage, mb)]

    def recv_bwd(mb):
        return [] if last else [("B", stage + 1, mb)]

    def send_bwd(mb):
        return [] if first else [("B", stage, mb)]

    def call(name, sends, recvs):
        if sends or recvs:
            acts.append(("p2p", name, sends, recvs))

    for mb in range(warmup):
        call("recv_forward", [], recv_fwd(mb))
        acts.append(("fwd", 0, mb))
        call("send_forward", send_fwd(mb), [])
    if remaining:
        call("recv_forward", [], recv_fwd(warmup))
    for i in range(remaining):
        fwd_mb, bwd_mb = warmup + i, i
        acts.append(("fwd", 0, fwd_mb))
        call("send_forward_recv_backward", send_fwd(fwd_mb), recv_bwd(bwd_mb))
        acts.append(("bwd", 0, bwd_mb))
        if i == remaining - 1:
            call("send_backward", send_bwd(bwd_mb), [])
        else:
            call("send_backward_recv_forward", send_bwd(bwd_mb), recv_fwd(fwd_mb + 1))
    for bwd_mb in range(remaining, m):
        call("recv_backward", [], recv_bwd(bwd_mb))
        acts.append(("bwd", 0, bwd_mb))
        call("send_backward", send_bwd(bwd_mb), [])
    return acts


def interleaved(stage: int, pp: int, v: int, m: int) -> list[tuple]:
    """Megatron's interleaved 1F1B (m a multiple of pp)."""
    total = m * v
    group = pp * v

    def chunk_fwd(k):
        return (k % group) // pp

    def chunk_bwd(k):
        return v - 1 - (k % group) // pp

    def mb_of(k):
        return (k // group) * pp + k % pp

    def glob(chunk):
        return chunk * pp + stage

    last_global = pp * v - 1
    warmup = total if m == pp else min((pp - stage - 1) * 2 + (v - 1) * pp, total)
    remaining = total - warmup
    acts: list[tuple] = []

    def fwd_send(k):
        g = glob(chunk_fwd(k))
        return [] if g == last_global else [("F", g, mb_of(k))]

    def fwd_recv(k):
        """Receive the input of virtual micro-batch k (if there is one and it is not the data)."""
        if k >= total:
            return []
        g = glob(chunk_fwd(k))
        return [] if g == 0 else [("F", g - 1, mb_of(k))]

    def bwd_send(k):
        g = glob(chunk_bwd(k))
        return [] if g == 0 else [("B", g, mb_of(k))]

    def bwd_recv(k):
        if k >= total:
            return []
        g = glob(chunk_bwd(k))
        return [] if g == last_global else [("B", g + 1, mb_of(k))]

    def call(name, sends, recvs):
        if sends or recvs:
            acts.append(("p2p", name, sends, recvs))

    call("recv_forward", [], fwd_recv(0))
    for k in range(warmup):
        acts.append(("fwd", chunk_fwd(k), mb_of(k)))
        recvs = fwd_recv(k + 1)
        if k == warmup - 1 and remaining:
            call("send_forward_backward_recv_forward_backward", fwd_send(k), recvs + bwd_recv(0))
        else:
            call("send_forward_recv_forward", fwd_send(k), recvs)
    for i in range(remaining):
        fk, bk = warmup + i, i
        acts.append(("fwd", chunk_fwd(fk), mb_of(fk)))
        acts.append(("bwd", chunk_bwd(bk), mb_of(bk)))
        last = i == remaining - 1
        recvs = ([] if last else fwd_recv(fk + 1)) + bwd_recv(bk + 1)
        call("send_forward_backward_recv_forward_backward", fwd_send(fk) + bwd_send(bk), recvs)
    if not remaining:  # all forwards were warm-up: the first backward's gradient is received here
        call("recv_backward", [], bwd_recv(0))
    for k in range(remaining, total):
        acts.append(("bwd", chunk_bwd(k), mb_of(k)))
        call("send_backward_recv_backward", bwd_send(k), bwd_recv(k + 1))
    return acts


def stage_actions(stage: int, pp: int, m: int, schedule: str = "1f1b", v: int = 1) -> list[tuple]:
    if schedule == "interleaved":
        return interleaved(stage, pp, v, m)
    return one_f_one_b(stage, pp, m)
