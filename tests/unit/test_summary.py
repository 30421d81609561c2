"""What an array says of its codecs (``filters`` / ``serializer`` / ``compressors``, ``info``): a sharded
array is described by its inner chain, whatever array->bytes codec that chain has."""

from __future__ import annotations

from typing import Any

import pytest

import rectizarr

_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("bool", {"serializer": {"name": "packbits"}}, "packbits"),
    ("f4", {}, "bytes"),
    ("f4", {"filters": [{"name": "transpose", "configuration": {"order": [0]}}]}, "bytes"),
    ("f8", {"serializer": {"name": "zfp", "configuration": {"mode": "reversible"}}}, "zfp"),
    ("str", {}, "vlen-utf8"),
]


@pytest.mark.parametrize(("dtype", "kw", "serializer"), _CASES)
def test_a_sharded_array_describes_its_inner_chain_like_an_unsharded_one(
    dtype: str, kw: dict[str, Any], serializer: str
) -> None:
    if serializer == "zfp":
        pytest.importorskip("zfpy")
    plain = rectizarr.create_array({}, shape=(8,), dtype=dtype, chunks=(2,), **kw)
    sharded = rectizarr.create_array({}, shape=(8,), dtype=dtype, chunks=(2,), shards=(4,), **kw)
    assert sharded.serializer.name == plain.serializer.name == serializer
    assert sharded.filters == plain.filters
    assert sharded.compressors == plain.compressors
    assert serializer in str(sharded.info)
