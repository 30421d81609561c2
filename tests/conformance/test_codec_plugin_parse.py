"""A codec plugged in through the ``rectizarr.codecs`` entry-point group is used when a ``zarr.json`` names
it: the document parses (the plugin's name is known), the plugin's factory builds the codec, an array
written with it reads back, and its JSON is written back as read. A name no plugin provides is still an
UnsupportedError at ``$.codecs[i].name``."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import rectizarr
from rectizarr.codecs import plugins
from rectizarr.core.codec_meta import PluginMeta, codecs_to_json, parse_codecs
from rectizarr.errors import MetadataError, UnsupportedError

MODULE = """
from rectizarr.codecs.base import BytesBytesCodec


class AddOne(BytesBytesCodec):
    name = "test.addone"

    def encode(self, data):
        return bytes((b + 1) % 256 for b in bytes(data))

    def decode(self, data, key=None):
        return bytes((b - 1) % 256 for b in bytes(data))


def make(configuration, dtype):
    if configuration:
        raise ValueError(f"takes no configuration, got {sorted(configuration)}")
    return AddOne()
"""


@pytest.fixture
def plugged(tmp_path: Path) -> Iterator[None]:
    (tmp_path / "rz_addone.py").write_text(MODULE)
    info = tmp_path / "rz_addone-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rz-addone\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        textwrap.dedent("""\
        [rectizarr.codecs]
        test.addone = rz_addone:make
        """)
    )
    sys.path.insert(0, str(tmp_path))
    plugins.refresh()
    try:
        yield
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("rz_addone", None)
        plugins.refresh()


def test_a_plugged_in_codec_is_parsed_built_and_used(plugged: None, tmp_path: Path) -> None:
    codecs = [
        {"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "test.addone", "configuration": {}},
    ]
    metas = parse_codecs(codecs)
    assert metas[1] == PluginMeta(name="test.addone", configuration={})
    assert codecs_to_json(metas) == codecs
    a = rectizarr.create_array(
        str(tmp_path / "a"),
        shape=(4,),
        chunks=(4,),
        dtype="uint8",
        serializer=codecs[0],
        compressors=[codecs[1]],
    )
    a[:] = np.array([0, 1, 2, 255], dtype="uint8")
    assert (tmp_path / "a" / "c" / "0").read_bytes() == bytes([1, 2, 3, 0])
    assert rectizarr.open_array(str(tmp_path / "a"))[:].tolist() == [0, 1, 2, 255]
    assert json.loads((tmp_path / "a" / "zarr.json").read_text())["codecs"][1] == codecs[1]


def test_a_plugins_refusal_names_the_configuration_path(plugged: None) -> None:
    from rectizarr.codecs.build import build_pipeline

    metas = parse_codecs(["bytes", {"name": "test.addone", "configuration": {"step": 2}}])
    with pytest.raises(MetadataError, match="takes no configuration") as info:
        build_pipeline(metas, np.dtype("uint8"), [np.array([4])])
    assert info.value.path == "$.codecs[1].configuration"


def test_names_no_plugin_provides_stay_unknown() -> None:
    with pytest.raises(UnsupportedError, match=r"unknown codec 'test\.addone'") as info:
        parse_codecs(["bytes", {"name": "test.addone"}])
    assert info.value.path == "$.codecs[1].name"
