"""The model description: parameter counts against the published ones and an explicit list of the
tensors of a GPT layer; FLOPs against the per-operation count; one-line errors for bad files."""

from __future__ import annotations

import re

import numpy as np
import pytest
from shared_data import REPO

from extradeep.errors import InputError
from extradeep.layouts.tables import read_layout_table
from extradeep.layouts.workload import TransformerShape, layer_parameters, load_transformer, training_flops


def gpt_layer_tensors(h: int, f: int) -> list[tuple[int, ...]]:
    """The trainable tensors of one Megatron GPT layer, written out one by one."""
    return [
        (h,),  # input layer norm weight
        (h,),  # input layer norm bias
        (3 * h, h),  # fused QKV weight
        (3 * h,),  # QKV bias
        (h, h),  # attention output projection
        (h,),  # its bias
        (h,),  # post-attention layer norm weight
        (h,),  # its bias
        (f, h),  # MLP up projection
        (f,),  # its bias
        (h, f),  # MLP down projection
        (h,),  # its bias
    ]


@pytest.mark.parametrize("h,f", [(1024, 4096), (3072, 12288), (8192, 22016)])
def test_layer_parameters_equal_the_sum_of_the_tensors(h, f):
    explicit = sum(int(np.prod(shape)) for shape in gpt_layer_tensors(h, f))
    assert layer_parameters(h, f) == explicit


def test_parameter_counts_match_the_published_models(published):
    """vTrain's and Megatron-LM's tables state each model's size: the shape must give it (to the 0.1B they are rounded to, or 1%)."""
    for name in ("vtrain_multi_node.csv", "megatron_sc21_table1.csv"):
        table = read_layout_table(published(name), defaults={"micro_batch": 1, "seq_len": 2048})
        for row in table.drop_duplicates("workload").itertuples():
            shape = TransformerShape(row.layers, row.hidden, row.heads, row.seq_len, row.vocab)
            assert shape.parameters == pytest.approx(row.params_billion * 1e9, rel=0.01, abs=0.05e9), (
                row.workload
            )  # stated to 0.1B


def test_training_flops_equal_the_per_operation_count():
    """Eq. 3 of Narayanan et al. against the FLOPs of each matrix product of a step, counted one by one."""
    b, s, layers, h, v = 8, 2048, 4, 1024, 51200
    forward_layer = (
        2 * b * s * h * 3 * h  # QKV
        + 2 * b * s * s * h  # Q K^T
        + 2 * b * s * s * h  # attention x V
        + 2 * b * s * h * h  # projection
        + 2 * b * s * h * 4 * h * 2  # MLP up and down
    )
    logits = 2 * b * s * h * v
    with_recompute = layers * forward_layer * 4 + logits * 3  # forward, recomputed forward, backward (2x)
    assert training_flops(b, s, layers, h, v, recompute=True) == pytest.approx(with_recompute)
    assert training_flops(b, s, layers, h, v, recompute=False) == pytest.approx(layers * forward_layer * 3 + logits * 3)


def test_model_description_reads_and_checks(tmp_path):
    good = tmp_path / "gpt.toml"
    good.write_text('parameters = "39.1B"\nlayers = 48\nhidden = 8192\nheads = 64\nseq-len = 2048\ndtype = "bf16"\n')
    shape = load_transformer(good)
    assert (shape.layers, shape.hidden, shape.heads, shape.seq_len, shape.param_bytes) == (48, 8192, 64, 2048, 2)
    assert shape.name == "gpt"
    cases = {
        "layers = 48\nhidden = 8192\nheads = 64\nseq-len = 2048\nwidth = 3\n": "unknown key(s) width",
        "layers = 48\nhidden = 8192\nheads = 64\n": "missing key(s) seq-len",
        'parameters = "10B"\nlayers = 48\nhidden = 8192\nheads = 64\nseq-len = 2048\n': "do not match the shape",
        "layers = 48\nhidden = 8192\nheads = 60\nseq-len = 2048\n": "not a multiple of heads",
        'layers = 48\nhidden = 8192\nheads = 64\nseq-len = 2048\ndtype = "int3"\n': "dtype must be one of",
        "layers = -1\nhidden = 8192\nheads = 64\nseq-len = 2048\n": "layers must be a whole number",
        # once read, and its products wrapped around in 64-bit integers into negative step times
        "layers = 9223372036854775807\nhidden = 8192\nheads = 64\nseq-len = 2048\n": "layers must be a whole number from 1 to",
        "layers = [\n": "not a readable TOML",
        # a list once became the model's name as the text "['x']"
        'name = ["x"]\nlayers = 48\nhidden = 8192\nheads = 64\nseq-len = 2048\n': "name must be text",
    }
    for text, problem in cases.items():
        bad = tmp_path / "bad.toml"
        bad.write_text(text)
        with pytest.raises(InputError, match=re.escape(problem)) as info:
            load_transformer(bad)
        assert str(bad) in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(InputError, match="no such model description"):
        load_transformer(tmp_path / "absent.toml")


def test_a_model_description_in_another_encoding_is_named(tmp_path):
    """UTF-16 (some Windows editors) and binary files once quoted the codec's own message."""
    shipped = (REPO / "sample_profiles" / "layouts" / "gpt-39b.toml").read_text()
    utf16, binary = tmp_path / "utf16.toml", tmp_path / "binary.toml"
    utf16.write_text(shipped, encoding="utf-16")
    binary.write_bytes(shipped.encode()[:40] + bytes(range(128, 256)))
    with pytest.raises(InputError, match="not UTF-8 text: byte 0xff at offset 0, it looks like UTF-16"):
        load_transformer(utf16)
    with pytest.raises(InputError, match="not UTF-8 text: byte 0x80 at offset 40, is it binary"):
        load_transformer(binary)
