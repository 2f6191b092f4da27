"""`layout_search`'s options: the GPU types to search over, each once, and one line for none."""

from __future__ import annotations

import pytest
from shared_data import REPO

from extradeep.errors import InputError
from extradeep.workflows.layouts import LayoutsOptions, hardware_list

MODEL = REPO / "sample_profiles" / "layouts" / "gpt-39b.toml"


def test_search_hardware_lists_each_type_once_in_the_order_given():
    """'a100-80gb,a100-80gb' once searched every layout twice (and counted twice the candidates)."""
    assert hardware_list("a100-80gb, h100-sxm,a100-80gb,") == ["a100-80gb", "h100-sxm"]
    assert hardware_list(["h100-sxm", "h100-sxm"]) == ["h100-sxm"]
    assert hardware_list(None) == [] and hardware_list("") == []


@pytest.mark.parametrize("value", [",", " , "])
def test_search_hardware_naming_no_type_is_one_line(value):
    """',' once read as the folder '.' and was refused as '.: no such hardware file'."""
    with pytest.raises(InputError) as info:
        LayoutsOptions(model=str(MODEL), gpus="128", global_batch=1536, search_hardware=value)
    assert info.value.field == "search_hardware" and "names no GPU type" in str(info.value)
