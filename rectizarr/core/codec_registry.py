"""The codec names rectizarr knows of beyond its own parsers: the numcodecs ids usable as ``numcodecs.<id>``
(and the kind of codec each is), the registered codecs it does not build in (and what implements them),
and the entry-point group through which a package plugs a codec in; and :func:`convert_config`, the
conversion of a configuration into its Struct with errors at their JSON path. Re-exported by
:mod:`rectizarr.core.codec_meta`."""

from __future__ import annotations

import re
from typing import Any, Literal, TypeAlias

import msgspec

from rectizarr._util import json_path
from rectizarr.errors import MetadataError, UnsupportedError

CodecKind: TypeAlias = Literal["array_array", "array_bytes", "bytes_bytes"]

#: numcodecs ids usable as ``numcodecs.<id>``, with the kind of codec each one is.
NUMCODECS_KINDS: dict[str, CodecKind] = {
    **dict.fromkeys(
        "blosc lz4 zstd zlib gzip bz2 lzma shuffle crc32 crc32c adler32 fletcher32 jenkins_lookup3".split(),
        "bytes_bytes",
    ),
    **dict.fromkeys("delta bitround fixedscaleoffset quantize packbits astype".split(), "array_array"),
    **dict.fromkeys("pcodec zfpy vlen-array".split(), "array_bytes"),
}


#: the entry-point group of codec plugins (the same as :data:`rectizarr.codecs.plugins.ENTRY_POINT_GROUP`)
PLUGIN_GROUP = "rectizarr.codecs"


_IMAGECODECS = "imagecodecs (its coders, wrapped by a 'rectizarr.codecs' plugin)"
_N5 = "zarr-n5 (a zarr-python plugin; pip install zarr-n5) or an N5 reader such as tensorstore's n5 driver"
_ZARRS = "zarrs (Rust; in Python the 'zarrs' codec pipeline of zarr-python)"
#: Registered codecs (zarr-extensions) rectizarr does not build in, and what implements them.
PROVIDERS: dict[str, str] = {
    "jpeg": _IMAGECODECS,
    "jpegxl": _IMAGECODECS,
    "lzw": _IMAGECODECS,
    "arrow-ipc": "pyarrow (Arrow IPC streams)",
    "nanovdb": "NanoVDB (OpenVDB's nanovdb library)",
    "n5": _N5,
    "n5_default": _N5,
    "n5_varlen": _N5,
    "n5_label_multiset": _N5,
    "label_multiset": _N5,
    "conditional": _ZARRS,
    "offset": "tifffile-style readers (chunks as TIFF files with a header)",
    "pad": "tifffile-style readers (chunks as TIFF files with a header)",
    "singleton_dim": _ZARRS,
    "vlen-ndarray": _ZARRS,
    "numcodecs.zfpy": "zfpy (pip install zfpy)",
    "numcodecs.pcodec": "pcodec (pip install pcodec)",
}


def unsupported_codec_error(name: str, path: str = "$.codecs") -> UnsupportedError:
    """The error for a codec neither built in nor plugged in: it names the codec, where it is registered and
    what implements it, and how a package can plug it in."""
    provider = PROVIDERS.get(name)
    where = "a codec registered in zarr-extensions" if provider else "not a codec rectizarr knows"
    hint = f"; implemented by {provider}" if provider else ""
    return UnsupportedError(
        f"{'' if provider else 'unknown '}codec {name!r} ({where}) is not built into rectizarr{hint}; a package "
        f"can provide it through "
        f"the {PLUGIN_GROUP!r} entry point (no codec can be skipped: must_understand false does not help)",
        path=json_path(path, "name"),
    )


def plugged_in(name: str) -> bool:
    """Whether an installed package declares a codec plugin for ``name`` (an unknown name: listed afresh)."""
    from importlib import metadata  # (slow to import: only for such names)

    return any(ep.name == name for ep in metadata.entry_points(group=PLUGIN_GROUP))


_AT = re.compile(r" - at `\$(?P<rest>[^`]*)`$")
_FIELD = re.compile(r"(?:unknown|missing required) field `(?P<field>[^`]+)`")


def convert_config(config: Any, cls: type[Any], path: str) -> Any:
    """``msgspec.convert`` with errors rewrapped as :class:`MetadataError` at the full JSON path."""
    try:
        return msgspec.convert(config, cls, strict=True)
    except msgspec.ValidationError as exc:
        msg = str(exc)
        where = path
        at = _AT.search(msg)
        if at:
            msg = msg[: at.start()]
            where = path + at.group("rest")
        field = _FIELD.search(msg)
        if field:  # (in a nested object too: the path names the field)
            where = json_path(where, field.group("field"))
        raise MetadataError(msg, path=where) from exc
