"""The hand-over of chunks decoded by an append's check to the data write that follows (rectizarr.io.cache)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import rectizarr
from rectizarr import tuning
from rectizarr.codecs.base import ChunkSpec
from rectizarr.codecs.build import build_pipeline
from rectizarr.codecs.pipeline import CodecPipeline
from rectizarr.core.codec_meta import parse_codecs
from rectizarr.io.cache import decoded, hand_over
from rectizarr.stores import MemoryStore

ZSTD = [{"name": "zstd", "configuration": {"level": 1}}]


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, ...]]:
    """The chunk shapes every pipeline decode is asked for, from now on."""
    shapes: list[tuple[int, ...]] = []
    plain = CodecPipeline.decode

    def decode(self: CodecPipeline, value: object, spec: object) -> np.ndarray:
        shapes.append(spec.shape)  # type: ignore[attr-defined]
        return plain(self, value, spec)  # type: ignore[arg-type]

    monkeypatch.setattr(CodecPipeline, "decode", decode)
    return shapes


def test_an_append_to_a_regular_grid_decodes_its_edge_chunk_once(monkeypatch: pytest.MonkeyPatch) -> None:
    a = rectizarr.create_array(MemoryStore(), shape=(5, 3), chunks=(8, 3), dtype="f4", compressors=ZSTD)
    a[...] = np.arange(15, dtype="f4").reshape(5, 3)
    shapes = _counted(monkeypatch)
    for i in range(6):  # the edge chunk, then (rows 8..) a new one
        a.append(np.full((1, 3), 100 + i, "f4"))
    assert (
        len(shapes) == 5
    )  # the 3 appends to chunk 0, then 2 of the 3 appends to chunk 1 (the first makes it)
    want = np.concatenate(
        [np.arange(15, dtype="f4").reshape(5, 3), 100 + np.repeat(np.arange(6), 3).reshape(6, 3)]
    )
    np.testing.assert_array_equal(a[...], want)


def _chain(dtype: str) -> tuple[CodecPipeline, ChunkSpec]:
    """A zstd chain and the spec of a chunk of 4 elements of ``dtype``."""
    metas = parse_codecs([{"name": "bytes", "configuration": {"endian": "little"}}, *ZSTD])
    pipeline = build_pipeline(metas, np.dtype(dtype), [np.array([4])])
    return pipeline, ChunkSpec((4,), np.dtype(dtype), np.zeros((), dtype))


def test_a_handed_over_chunk_is_taken_once_and_only_for_the_same_bytes_codecs_and_shape() -> None:
    store = MemoryStore()
    pipeline, spec = _chain("i2")
    value = bytes(pipeline.encode(np.array([1, 2, 3, 4], "i2"), spec))
    marked = np.array([7, 7, 7, 7], "i2")  # not what the bytes decode to: tells a hand-over from a decode
    hand_over(store, "c/0", value, pipeline, marked)
    assert decoded(store, "c/0", value, pipeline, spec) is marked
    assert decoded(store, "c/0", value, pipeline, spec).tolist() == [1, 2, 3, 4]  # taken once
    other_value = bytes(pipeline.encode(np.array([1, 2, 3, 5], "i2"), spec))
    other_chain, other_spec = _chain("u2")
    for key, v, chain, s in (
        ("c/0", other_value, pipeline, spec),  # other bytes
        ("c/1", value, pipeline, spec),  # another key
        ("c/0", value, pipeline, replace(spec, shape=(2, 2))),  # another chunk shape
        ("c/0", value, other_chain, other_spec),  # other codecs (a dtype of the same size)
    ):
        hand_over(store, "c/0", value, pipeline, marked)
        assert decoded(store, key, v, chain, s) is not marked
    hand_over(store, "c/0", value, pipeline, marked)
    assert decoded(MemoryStore(), "c/0", value, pipeline, spec) is not marked  # another store


def test_the_hand_over_keeps_at_most_handover_bytes_newest_first() -> None:
    store = MemoryStore()
    pipeline, spec = _chain("i8")
    values = [bytes(pipeline.encode(np.full(4, i, "i8"), spec)) for i in range(3)]
    marked = [np.full(4, 10 + i, "i8") for i in range(3)]  # 32 bytes each
    with tuning.use(replace(tuning.current(), handover_bytes=64)):
        for i in range(3):
            hand_over(store, f"c/{i}", values[i], pipeline, marked[i])
    got = [decoded(store, f"c/{i}", values[i], pipeline, spec) for i in range(3)]
    assert got[0].tolist() == [0, 0, 0, 0] and got[1] is marked[1] and got[2] is marked[2]
