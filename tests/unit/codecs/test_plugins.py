"""The ``rectizarr.codecs`` entry-point group: a package (a real dist-info on ``sys.path``) plugs a codec in;
registered codecs rectizarr does not build in are refused naming the codec and what implements it."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from rectizarr.codecs import plugins
from rectizarr.codecs.base import BytesBytesCodec
from rectizarr.errors import MetadataError, UnsupportedError

PLUGIN = """
from rectizarr.codecs.base import BytesBytesCodec


class Xor(BytesBytesCodec):
    name = "example.xor"

    def __init__(self, key):
        self.key = key

    def encode(self, data):
        return bytes(b ^ self.key for b in bytes(data))

    def decode(self, data, key=None):
        return bytes(b ^ self.key for b in bytes(data))


def make(configuration, dtype):
    key = configuration["key"]
    if not isinstance(key, int) or not 0 <= key < 256:
        raise ValueError(f"key must be a byte, got {key!r}")
    return Xor(key)


def not_a_codec(configuration, dtype):
    return "nothing"
"""


def _install(tmp_path: Path) -> None:
    (tmp_path / "example_xor.py").write_text(PLUGIN)
    info = tmp_path / "example_xor-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: example-xor\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        textwrap.dedent("""\
        [rectizarr.codecs]
        example.xor = example_xor:make
        example.broken = example_xor_missing:make
        example.bad = example_xor:not_a_codec
        """)
    )
    sys.path.insert(0, str(tmp_path))


@pytest.fixture
def installed(tmp_path: Path) -> Iterator[Path]:
    """A package 'example-xor' installed the way pip leaves one: a module and its dist-info."""
    _install(tmp_path)
    plugins.refresh()
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("example_xor", None)
        plugins.refresh()


def test_an_installed_package_plugs_a_codec_in(installed: Path) -> None:
    assert {"example.xor", "example.broken", "example.bad"} <= plugins.plugin_names()
    codec = plugins.build_plugin_codec("example.xor", {"key": 7}, np.dtype("uint8"))
    assert isinstance(codec, BytesBytesCodec)
    assert codec.encode(b"\x00\x07") == b"\x07\x00"
    assert codec.decode(codec.encode(b"zarr")) == b"zarr"


def test_plugin_failures_name_the_codec_and_the_json_path(installed: Path) -> None:
    with pytest.raises(MetadataError, match="key must be a byte") as e:
        plugins.build_plugin_codec("example.xor", {"key": 300}, np.dtype("uint8"), "$.codecs[1]")
    assert e.value.path == "$.codecs[1].configuration"
    with pytest.raises(UnsupportedError, match=r"'example\.broken'.*example_xor_missing.*example-xor 0\.1"):
        plugins.build_plugin_codec("example.broken", {}, np.dtype("uint8"))
    with pytest.raises(UnsupportedError, match="returned str") as e:
        plugins.build_plugin_codec("example.bad", {}, np.dtype("uint8"), "$.codecs[0]")
    assert e.value.path == "$.codecs[0]"


def test_without_the_package_there_is_no_plugin() -> None:
    plugins.refresh()
    assert "example.xor" not in plugins.plugin_names()
    assert plugins.build_plugin_codec("example.xor", {"key": 1}, np.dtype("uint8")) is None


@pytest.mark.parametrize(
    ("name", "provider"),
    [
        ("jpeg", "imagecodecs"),
        ("jpegxl", "imagecodecs"),
        ("n5_default", "N5"),
        ("arrow-ipc", "pyarrow"),
        ("nanovdb", "NanoVDB"),
    ],
)
def test_registered_codecs_not_built_in_name_their_provider(name: str, provider: str) -> None:
    err = plugins.unsupported_codec_error(name, "$.codecs[2]")
    assert isinstance(err, UnsupportedError)
    assert f"codec {name!r} (a codec registered in zarr-extensions)" in str(err)
    assert provider in str(err) and "'rectizarr.codecs' entry point" in str(err)
    assert err.path == "$.codecs[2].name"


def test_unknown_codecs_are_said_to_be_unknown() -> None:
    err = plugins.unsupported_codec_error("made.up", "$.codecs[0]")
    assert "unknown codec 'made.up' (not a codec rectizarr knows)" in str(err)


@pytest.mark.parametrize("name", ["jpeg", "n5_default"])
def test_opening_an_array_with_a_registered_codec_not_built_in_names_its_provider(name: str) -> None:
    """The error comes where the document is read (not only from ``rectizarr validate``)."""
    from rectizarr.core.codec_meta import parse_codecs

    with pytest.raises(
        UnsupportedError, match=f"codec '{name}' \\(a codec registered in zarr-extensions\\)"
    ) as info:
        parse_codecs(["bytes", {"name": name, "configuration": {}}])
    assert info.value.path == "$.codecs[1].name"


def test_a_package_installed_after_the_first_listing_is_found(tmp_path: Path) -> None:
    plugins.refresh()
    assert "example.xor" not in plugins.plugin_names()  # listed (and remembered) before the install
    _install(tmp_path)
    try:
        codec = plugins.build_plugin_codec("example.xor", {"key": 1}, np.dtype("uint8"))
        assert codec is not None and codec.decode(b"\x01") == b"\x00"
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("example_xor", None)
        plugins.refresh()
