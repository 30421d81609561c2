"""What a new user meets first: messages in the user's words, naming the store; a readable info."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import rectizarr
from rectizarr import MemoryStore


def test_shard_chunk_mismatch_speaks_of_shards_and_chunks() -> None:
    with pytest.raises(rectizarr.MetadataError) as info:
        rectizarr.create_array(MemoryStore(), shape=(20, 20), dtype="f4", shards=(10, 10), chunks=(3, 5))
    message = str(info.value)
    assert "shards=(10, 10)" in message and "chunks=(3, 5)" in message and "axis 0" in message
    assert "codecs[0]" not in message


@pytest.mark.parametrize(
    ("name", "config"), [("gzip", {"level": 5}), ("zstd", {"level": 0, "checksum": False}), ("crc32c", {})]
)
def test_codec_names_take_zarr_pythons_defaults(name: str, config: dict[str, object]) -> None:
    a = rectizarr.create_array(MemoryStore(), shape=(8,), dtype="i4", compressors=name)
    assert a.compressors[0].to_dict() == (
        {"name": name, "configuration": config} if config else {"name": name}
    )
    again = rectizarr.create_array(MemoryStore(), shape=(8,), dtype="i4", compressors=a.compressors)
    assert again.compressors == a.compressors  # specs pass back in


def test_node_of_the_other_kind_is_named_as_such(tmp_path: Path) -> None:
    rectizarr.create_array(tmp_path / "a", shape=(3,), dtype="u1")
    rectizarr.create_group(tmp_path / "g")
    with pytest.raises(rectizarr.NodeTypeError, match="is an array, not a group") as info:
        rectizarr.open_group(tmp_path / "a", mode="r")
    assert str(tmp_path / "a") in str(info.value) and isinstance(info.value, ValueError)
    with pytest.raises(rectizarr.NodeTypeError, match="is a group, not an array"):
        rectizarr.open_array(tmp_path / "g", mode="r")
    with pytest.raises(rectizarr.NodeNotFoundError, match=str(tmp_path / "missing")):
        rectizarr.open_array(tmp_path / "missing", mode="r")


def test_info_reads_like_a_summary() -> None:
    a = rectizarr.create_array(
        MemoryStore(),
        name="temp",
        shape=(365, 10),
        dtype="f4",
        fill_value=np.nan,
        chunks=(10, 10),
        shards=(40, 10),
        dimension_names=["time", "x"],
    )
    a[:5] = 1.0
    lines = {k.strip(): v for k, v in (line.split(" : ", 1) for line in a.info.splitlines())}
    assert lines["Name"] == "/temp" and lines["Fill value"] == "NaN" and lines["Data type"] == "float32"
    assert lines["Shard shape"] == "(40, 10)" and lines["Chunk shape"] == "(10, 10)"
    assert (
        lines["Compressors"] == "(zstd(level=0, checksum=False),)" and lines["Dimensions"] == "('time', 'x')"
    )
    assert max(len(line) for line in a.info.splitlines()) < 100
    complete = a.info_complete()
    assert "Shards Initialized : 1" in complete and "Chunks Initialized : 4" in complete
    assert (
        a.nchunks == 37 * 1 and a.nshards == 10 and a.nchunks_initialized == 4 and a.nshards_initialized == 1
    )


def test_append_returns_the_new_shape_and_rectilinear_chunks_is_an_attribute_error() -> None:
    a = rectizarr.create_array(MemoryStore(), shape=(4, 2), dtype="i2", chunks=[[1, 3], 2])
    assert a.append(np.ones((3, 2), "i2")) == (7, 2)
    with pytest.raises(AttributeError, match="write_chunk_sizes"):
        _ = a.chunks
    assert getattr(a, "chunks", "none") == "none"
