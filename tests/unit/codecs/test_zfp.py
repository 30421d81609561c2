"""zfp's ``expert`` mode is read (zfpy decodes any mode its header names: the codec writes zfp's long mode
header with the four parameters) and refused on write (zfpy cannot compress in it). zfpy has no expert
compressor, so the streams are those of the other modes, whose parameters an expert configuration spells out
exactly (zfp's own mapping: fixed precision p is minbits 1, maxbits 16658, maxprec p, minexp -1074; fixed
accuracy 2**e is maxprec 64, minexp e; a fixed rate of b bits a block is minbits = maxbits = b): each decodes
bit for bit as its own mode does."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import rectizarr
from rectizarr.codecs.base import ChunkSpec
from rectizarr.codecs.build import build_pipeline
from rectizarr.codecs.pipeline import CodecPipeline
from rectizarr.codecs.zfp import expert_mode_bits
from rectizarr.core.codec_meta import codecs_to_json, parse_codecs
from rectizarr.errors import MetadataError, UnsupportedError

zfpy = pytest.importorskip("zfpy")  # (the zfp extra, in the test extra)

SHAPES = [(7,), (5, 6), (3, 4, 5), (2, 3, 4, 5)]


def _pipe(config: dict[str, Any], dtype: str, shape: tuple[int, ...]) -> CodecPipeline:
    return build_pipeline(
        parse_codecs([{"name": "zfp", "configuration": config}]),
        np.dtype(dtype),
        [np.array([s]) for s in shape],
    )


def _expert(minbits: int, maxbits: int, maxprec: int, minexp: int) -> dict[str, Any]:
    return {"mode": "expert", "minbits": minbits, "maxbits": maxbits, "maxprec": maxprec, "minexp": minexp}


def _values(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    return (np.random.default_rng(len(shape)).standard_normal(shape) * 1000).astype(dtype)


def _same_decode(mode: dict[str, Any], expert: dict[str, Any], dtype: str, shape: tuple[int, ...]) -> None:
    spec = ChunkSpec(shape, np.dtype(dtype), np.zeros((), dtype))
    stored = _pipe(mode, dtype, shape).encode(_values(dtype, shape), spec)
    want = _pipe(mode, dtype, shape).decode(stored, spec)
    assert _pipe(expert, dtype, shape).decode(stored, spec).tobytes() == want.tobytes()


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("precision", [3, 17])
def test_fixed_precision_streams_read_as_expert(dtype: str, shape: tuple[int, ...], precision: int) -> None:
    mode = {"mode": "fixed_precision", "precision": precision}
    _same_decode(mode, _expert(1, 16658, precision, -1074), dtype, shape)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fixed_accuracy_streams_read_as_expert(dtype: str, shape: tuple[int, ...]) -> None:
    _same_decode({"mode": "fixed_accuracy", "tolerance": 0.125}, _expert(1, 16658, 64, -3), dtype, shape)


@pytest.mark.parametrize("shape", SHAPES[:3])
@pytest.mark.parametrize("rate", [1, 4.5, 8])
def test_fixed_rate_streams_read_as_expert(shape: tuple[int, ...], rate: float) -> None:
    bits = int(np.floor(64 * rate + 0.5))  # zarrs' rate: bits of a 3-d block, whatever the chunk
    _same_decode({"mode": "fixed_rate", "rate": rate}, _expert(bits, bits, 64, -1074), "float32", shape)


def test_the_header_zfp_reads_back_names_expert_mode() -> None:
    """The registry's example configuration (codecs/zfp/examples/expert.json) in the header zfpy parses."""
    field = np.unpackbits(
        np.frombuffer(zfpy.compress_numpy(np.zeros((4, 4), "f4")), np.uint8), bitorder="little"
    )
    header = np.concatenate([field[:84], expert_mode_bits(1, 13, 19, -2)])  # magic, field, then the mode
    info = zfpy.header(
        np.packbits(np.concatenate([header, np.zeros(64, np.uint8)]), bitorder="little").tobytes()
    )
    assert info["mode"] == "expert"
    assert (info["config"]["expert"]["maxprec"], info["config"]["expert"]["minexp"]) == (19, -2)


def test_the_long_mode_layout() -> None:
    bits = expert_mode_bits(1, 13, 19, -2)
    value = int.from_bytes(np.packbits(bits, bitorder="little").tobytes(), "little")
    assert value & 0xFFF == 0xFFF
    assert (value >> 12) & 0x7FFF == 0  # minbits - 1
    assert (value >> 27) & 0x7FFF == 12  # maxbits - 1
    assert (value >> 42) & 0x7F == 18  # maxprec - 1
    assert value >> 49 == -2 + 16495  # minexp + 16495


def test_writing_in_expert_mode_is_refused_naming_the_mode() -> None:
    a = rectizarr.create_array(
        rectizarr.MemoryStore(),
        shape=(4,),
        dtype="float32",
        serializer={"name": "zfp", "configuration": _expert(1, 64, 32, -100)},
        compressors=None,
    )
    with pytest.raises(UnsupportedError, match="expert mode is read but not written"):
        a[...] = np.arange(4, dtype="float32")
    assert a.nchunks_initialized == 0


def test_an_expert_array_opens_and_reads(tmp_path: Any) -> None:
    spec = ChunkSpec((4, 4), np.dtype("float64"), np.zeros((), "float64"))
    values = _values("float64", (4, 4))
    stored = _pipe({"mode": "fixed_precision", "precision": 20}, "float64", (4, 4)).encode(values, spec)
    doc = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [4, 4],
        "data_type": "float64",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 4]}},
        "chunk_key_encoding": {"name": "default"},
        "fill_value": 0.0,
        "codecs": [{"name": "zfp", "configuration": _expert(1, 16658, 20, -1074)}],
    }
    (tmp_path / "zarr.json").write_text(json.dumps(doc))
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "0").mkdir()
    (tmp_path / "c" / "0" / "0").write_bytes(stored)
    got = rectizarr.open_array(str(tmp_path))[...]
    assert np.allclose(got, values, rtol=1e-4)
    assert not list(rectizarr.validate(str(tmp_path)).errors)
    assert codecs_to_json(parse_codecs(doc["codecs"])) == doc["codecs"]


@pytest.mark.parametrize(
    "config", [_expert(65, 64, 32, -100), _expert(1, 64, 0, -100), _expert(1, 64, 65, -100)]
)
def test_invalid_expert_parameters(config: dict[str, Any]) -> None:
    with pytest.raises(MetadataError, match="minbits <= maxbits") as e:
        _pipe(config, "float32", (4,))
    assert e.value.path == "$.codecs[0].configuration"
