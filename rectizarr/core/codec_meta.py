"""Codec metadata: one frozen msgspec Struct per codec, parsed from and written to ``zarr.json`` JSON.

The Structs only validate; runtime codecs are built from them (:func:`rectizarr.codecs.build_codec`).
Reading is lenient where real writers disagree (short-hand names, ``must_understand: false`` on known
codecs, zarr-python's defaults for ``sharding_indexed`` and ``blosc``); writing is canonical."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, Literal, TypeAlias

import msgspec

from rectizarr._util import json_path
from rectizarr.core.codec_registry import (
    NUMCODECS_KINDS,
    CodecKind,
    convert_config,
    plugged_in,
    unsupported_codec_error,
)
from rectizarr.core.dtype_ext import MAX_NESTING
from rectizarr.errors import LenientMetadataWarning, MetadataError

__all__ = ["NUMCODECS_KINDS"]  # re-exported from core.codec_registry

_Positive = Annotated[int, msgspec.Meta(ge=1)]


class _Config(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Base of the codec metadata Structs; their fields are the codec's ``configuration`` keys."""

    name: ClassVar[str]


class BytesMeta(_Config, frozen=True, forbid_unknown_fields=True):
    name: ClassVar[str] = "bytes"
    endian: Literal["little", "big"] | None = None


class TransposeMeta(_Config, frozen=True, forbid_unknown_fields=True):
    name: ClassVar[str] = "transpose"
    order: tuple[Annotated[int, msgspec.Meta(ge=0)], ...]


class GzipMeta(_Config, frozen=True, forbid_unknown_fields=True):
    name: ClassVar[str] = "gzip"
    level: Annotated[int, msgspec.Meta(ge=0, le=9)]


class ZstdMeta(_Config, frozen=True, forbid_unknown_fields=True):
    name: ClassVar[str] = "zstd"
    level: Annotated[int, msgspec.Meta(ge=-131072, le=22)]
    checksum: bool = False


class BloscMeta(_Config, frozen=True, forbid_unknown_fields=True):
    """``typesize`` is ``None`` until the pipeline fills in the itemsize of the data it codes."""

    name: ClassVar[str] = "blosc"
    cname: Literal["lz4", "lz4hc", "blosclz", "zstd", "snappy", "zlib"]
    shuffle: Literal["noshuffle", "shuffle", "bitshuffle"]
    clevel: Annotated[int, msgspec.Meta(ge=0, le=9)] = 5
    # c-blosc takes both as C ints: larger ones opened, then failed every write (OverflowError, error -10)
    typesize: Annotated[int, msgspec.Meta(ge=1, le=2**31 - 1)] | None = None
    blocksize: Annotated[int, msgspec.Meta(ge=0, le=2**31 - 1)] = 0


class Crc32cMeta(_Config, frozen=True, forbid_unknown_fields=True):
    name: ClassVar[str] = "crc32c"


class VlenUtf8Meta(_Config, frozen=True, forbid_unknown_fields=True):
    name: ClassVar[str] = "vlen-utf8"


class VlenBytesMeta(_Config, frozen=True, forbid_unknown_fields=True):
    name: ClassVar[str] = "vlen-bytes"


_Scalar: TypeAlias = int | float | str  # a JSON scalar in the fill-value encoding of some data type


class ScaleOffsetMeta(_Config, frozen=True, forbid_unknown_fields=True):
    """``out = (in - offset) * scale``; both are scalars of the input's data type in its fill-value JSON
    encoding, checked when the codec is built (the input's data type is known there)."""

    name: ClassVar[str] = "scale_offset"
    offset: _Scalar = 0
    scale: _Scalar = 1


class ScalarMapMeta(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """``cast_value``'s value pairs per direction, ``[[from, to], ...]`` (each a fill value of its side); a
    direction without pairs is not written."""

    encode: tuple[tuple[_Scalar, _Scalar], ...] | None = None
    decode: tuple[tuple[_Scalar, _Scalar], ...] | None = None


class CastValueMeta(_Config, frozen=True, forbid_unknown_fields=True):
    """Value conversion to ``data_type``; ``out_of_range`` ``None`` is the spec's ``"error"`` (read as
    such, written by leaving the key out, as zarr-python does: its backend knows no ``"error"``)."""

    name: ClassVar[str] = "cast_value"
    data_type: str | dict[str, Any]
    rounding: Literal[
        "nearest-even", "towards-zero", "towards-positive", "towards-negative", "nearest-away"
    ] = "nearest-even"
    out_of_range: Literal["clamp", "wrap"] | None = None
    scalar_map: ScalarMapMeta | None = None


class ReshapeMeta(_Config, frozen=True, forbid_unknown_fields=True):
    """Output lengths: positive, ``-1`` (the rest), or a list of input axes whose lengths multiply."""

    name: ClassVar[str] = "reshape"
    shape: tuple[Annotated[int, msgspec.Meta(ge=-1)] | tuple[Annotated[int, msgspec.Meta(ge=0)], ...], ...]


class SqueezeMeta(_Config, frozen=True, forbid_unknown_fields=True):
    """zarrs' codec dropping a chunk's axes of length 1 (registered as ``zarrs.squeeze``)."""

    name: ClassVar[str] = "zarrs.squeeze"


class PackbitsMeta(_Config, frozen=True, forbid_unknown_fields=True):
    """zarr-extensions' ``packbits`` (array->bytes; not numcodecs' ``packbits`` filter)."""

    name: ClassVar[str] = "packbits"
    padding_encoding: Literal["first_byte", "last_byte", "none"] = "none"
    first_bit: Annotated[int, msgspec.Meta(ge=0, le=63)] | None = None
    last_bit: Annotated[int, msgspec.Meta(ge=0, le=63)] | None = None


class BitroundMeta(_Config, frozen=True, forbid_unknown_fields=True):
    """zarr-extensions' ``bitround`` (floats and integers; ``numcodecs.bitround`` stays numcodecs')."""

    name: ClassVar[str] = "bitround"
    keepbits: Annotated[int, msgspec.Meta(ge=0, le=64)]


_ZFP_PARAMS: dict[str, tuple[str, ...]] = {
    "reversible": (),
    "expert": ("minbits", "maxbits", "maxprec", "minexp"),
    "fixed_accuracy": ("tolerance",),
    "fixed_rate": ("rate",),
    "fixed_precision": ("precision",),
}


class ZfpMeta(_Config, frozen=True, forbid_unknown_fields=True):
    """zarr-extensions' ``zfp`` (header-less; not ``numcodecs.zfpy``); ``mode`` says which keys it takes."""

    name: ClassVar[str] = "zfp"
    mode: Literal["reversible", "expert", "fixed_accuracy", "fixed_rate", "fixed_precision"]
    tolerance: Annotated[float, msgspec.Meta(ge=0)] | None = None
    rate: Annotated[float, msgspec.Meta(gt=0)] | None = None
    precision: Annotated[int, msgspec.Meta(ge=1, le=64)] | None = None
    minbits: Annotated[int, msgspec.Meta(ge=0)] | None = None
    maxbits: Annotated[int, msgspec.Meta(ge=0)] | None = None
    maxprec: Annotated[int, msgspec.Meta(ge=0)] | None = None
    minexp: int | None = None

    def params(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in _ZFP_PARAMS[self.mode]}


class VlenArrayMeta(_Config, frozen=True, forbid_unknown_fields=True):
    """zarrs' ``vlen-array`` (alias ``zarrs.vlen_v2``): vlen-utf8's layout on any variable-length type. Not
    ``numcodecs.vlen-array`` (numeric arrays as elements, a ``dtype`` configuration: a :class:`NumcodecsMeta`)."""

    name: ClassVar[str] = "vlen-array"


class _ShardingConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    chunk_shape: tuple[_Positive, ...]
    codecs: Any = None
    index_codecs: Any = None
    index_location: Literal["start", "end"] = "end"


class ShardingMeta(msgspec.Struct, frozen=True):
    name: ClassVar[str] = "sharding_indexed"
    chunk_shape: tuple[int, ...]
    codecs: tuple[CodecMeta, ...]
    index_codecs: tuple[CodecMeta, ...]
    index_location: Literal["start", "end"] = "end"


class OptionalMeta(msgspec.Struct, frozen=True):
    """zarrs' ``optional`` (array->bytes, for the ``optional`` data type): the validity mask through
    ``mask_codecs``, the present values (flattened) through ``data_codecs``."""

    name: ClassVar[str] = "optional"
    mask_codecs: tuple[CodecMeta, ...]
    data_codecs: tuple[CodecMeta, ...]


class NumcodecsMeta(msgspec.Struct, frozen=True):
    """A numcodecs codec under zarr-python's ``numcodecs.<id>`` name.

    ``configuration`` is numcodecs' ``get_config()`` without ``id``; it is checked when the codec is built."""

    name: str
    configuration: dict[str, Any] = msgspec.field(default_factory=dict)

    @property
    def codec_id(self) -> str:
        return self.name.removeprefix("numcodecs.")

    @property
    def kind(self) -> CodecKind:
        return NUMCODECS_KINDS[self.codec_id]


class PluginMeta(msgspec.Struct, frozen=True):
    """A codec no built-in parser knows, provided by a package through the ``rectizarr.codecs`` entry-point
    group (:mod:`rectizarr.codecs.plugins` builds it; its factory checks ``configuration``)."""

    name: str
    configuration: dict[str, Any] = msgspec.field(default_factory=dict)


class V2ChunkMeta(msgspec.Struct, frozen=True):
    """The array->bytes step of a Zarr v2 array with filters (or an object or structured dtype): the chunk in
    ``order``, converted to the declared ``dtype`` (v2 JSON form), through each numcodecs filter in turn.
    Built from ``.zarray`` only (:mod:`rectizarr.core.v2meta`); never written to a ``zarr.json``."""

    name: ClassVar[str] = "zarr_v2.filters"
    dtype: Any
    order: Literal["C", "F"]
    filters: tuple[dict[str, Any], ...]


CodecMeta: TypeAlias = (
    BytesMeta
    | TransposeMeta
    | GzipMeta
    | ZstdMeta
    | BloscMeta
    | Crc32cMeta
    | VlenUtf8Meta
    | VlenBytesMeta
    | ShardingMeta
    | NumcodecsMeta
    | V2ChunkMeta
    | ScaleOffsetMeta
    | CastValueMeta
    | ReshapeMeta
    | SqueezeMeta
    | PackbitsMeta
    | BitroundMeta
    | ZfpMeta
    | PluginMeta
    | VlenArrayMeta
    | OptionalMeta
)

_PLAIN: dict[str, type[_Config]] = {
    cls.name: cls for cls in _Config.__subclasses__()
}  # codecs without chains
# Keys zarr-python leaves out (the spec requires them): read with a warning, as the Struct's defaults.
_DEFAULTED: dict[type[_Config], tuple[set[str], str]] = {
    ScaleOffsetMeta: ({"offset", "scale"}, " (required by the spec); using offset 0, scale 1"),
    BloscMeta: (
        {"typesize", "clevel", "blocksize"},
        "; using zarr-python's defaults (typesize = itemsize, clevel 5, blocksize 0)",
    ),
}
# Old or foreign names of codecs we implement natively; they are rewritten under the canonical name.
_ALIASES: dict[str, str] = {
    "endian": "bytes",
    "numcodecs.vlen-utf8": "vlen-utf8",
    "numcodecs.vlen-bytes": "vlen-bytes",
    "squeeze": "zarrs.squeeze",
    "zarrs.zfp": "zfp",  # zarrs' names while these were experimental
    "zarrs.bitround": "bitround",
    "zarrs.vlen_v2": "vlen-array",
    "zarrs.optional": "optional",
}


def _parse_one(value: Any, path: str) -> CodecMeta:
    if isinstance(value, str):
        name, config, has_config = value, {}, False
    elif isinstance(value, dict):
        extra = set(value) - {"name", "configuration", "must_understand"}
        if extra:
            raise MetadataError(f"unknown key {sorted(extra)[0]!r} in a codec object", path=path)
        raw_name = value.get("name")
        if not isinstance(raw_name, str):
            raise MetadataError("codec objects need a string 'name'", path=json_path(path, "name"))
        name = raw_name
        must = value.get("must_understand", True)
        if not isinstance(must, bool):
            raise MetadataError(
                "'must_understand' must be true or false", path=json_path(path, "must_understand")
            )
        has_config = "configuration" in value
        config = value.get("configuration", {})
        if not isinstance(config, dict):
            raise MetadataError("'configuration' must be an object", path=json_path(path, "configuration"))
    else:
        raise MetadataError(f"a codec must be an object or a name, got {value!r}", path=path)
    cpath = json_path(path, "configuration")
    name = _ALIASES.get(name, name)
    if name == "sharding_indexed":
        return _parse_sharding(config, cpath)
    if name == "optional":
        for key in sorted(set(config) ^ {"mask_codecs", "data_codecs"}):
            what = "lacks" if key not in config else "has an unknown key"
            raise MetadataError(
                f"the optional codec's configuration {what} {key!r}", path=json_path(cpath, key)
            )
        chains = [parse_codecs(config[k], json_path(cpath, k)) for k in ("mask_codecs", "data_codecs")]
        return OptionalMeta(mask_codecs=chains[0], data_codecs=chains[1])
    if name in _PLAIN:
        cls = _PLAIN[name]
        if not has_config and cls.__struct_fields__ and cls not in (BytesMeta, ScaleOffsetMeta, PackbitsMeta):
            raise MetadataError(f"codec {name!r} needs a 'configuration' object", path=path)
        if cls is CastValueMeta and config.get("out_of_range") == "error":
            config = {k: v for k, v in config.items() if k != "out_of_range"}  # the default, spelt out
        meta: CodecMeta = convert_config(config, cls, cpath)
        if isinstance(meta, ZfpMeta):
            wanted = set(_ZFP_PARAMS[meta.mode])
            for key in sorted((set(config) - {"mode"}) ^ wanted):
                what = "needs" if key in wanted else "does not take"
                raise MetadataError(f"zfp mode {meta.mode!r} {what} {key!r}", path=json_path(cpath, key))
        if cls in _DEFAULTED:
            keys, using = _DEFAULTED[cls]
            missing = sorted(keys - set(config))
            if missing:
                warnings.warn(
                    f"{cpath} lacks {', '.join(missing)}{using}", LenientMetadataWarning, stacklevel=4
                )
        return meta
    if name.startswith("numcodecs."):  # (zarrs' packbits, bitround and zfp differ from numcodecs' codecs)
        meta = NumcodecsMeta(name=name, configuration=dict(config))
        if meta.codec_id in NUMCODECS_KINDS:
            if "id" in config:
                raise MetadataError("'id' is implied by the codec name", path=json_path(cpath, "id"))
            return meta
    if plugged_in(name):
        return PluginMeta(name=name, configuration=dict(config))
    raise unsupported_codec_error(name, path)


def _parse_sharding(config: dict[str, Any], path: str) -> ShardingMeta:
    cfg: _ShardingConfig = convert_config(config, _ShardingConfig, path)
    defaults: dict[str, list[Any]] = {
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
    }
    chains = {}
    for key, default in defaults.items():
        raw = getattr(cfg, key)
        if raw is None:
            warnings.warn(
                f"{json_path(path, key)} is missing (required by the spec); using the zarr-python default "
                f"{default}",
                LenientMetadataWarning,
                stacklevel=4,
            )
            raw = default
        chains[key] = parse_codecs(raw, json_path(path, key))
    return ShardingMeta(
        chunk_shape=cfg.chunk_shape,
        codecs=chains["codecs"],
        index_codecs=chains["index_codecs"],
        index_location=cfg.index_location,
    )


def parse_codecs(value: Any, path: str = "$.codecs") -> tuple[CodecMeta, ...]:
    """Parse a decoded ``codecs`` JSON list (chain-order rules are checked by the pipeline)."""
    if not isinstance(value, list | tuple):
        raise MetadataError(f"'codecs' must be a list, got {type(value).__name__}", path=path)
    if not value:
        raise MetadataError("'codecs' must not be empty: an array->bytes codec is required", path=path)
    if path.count(".configuration") > MAX_NESTING:
        raise MetadataError(f"sharding nested more than {MAX_NESTING} levels deep", path=path)
    return tuple(_parse_one(item, json_path(path, i)) for i, item in enumerate(value))


def _to_json(meta: CodecMeta) -> dict[str, Any]:
    match meta:
        case BytesMeta(endian=None):
            return {"name": "bytes"}
        case ZfpMeta():
            return {"name": meta.name, "configuration": {"mode": meta.mode, **meta.params()}}
        case Crc32cMeta() | VlenBytesMeta():
            return {"name": meta.name}
        case OptionalMeta() | ShardingMeta():  # (their chains: the ``*codecs`` fields)
            fields = msgspec.structs.asdict(meta)
            config = {k: codecs_to_json(v) if k.endswith("codecs") else v for k, v in fields.items()}
            if isinstance(meta, ShardingMeta):
                config["chunk_shape"] = list(meta.chunk_shape)
            return {"name": meta.name, "configuration": config}
        case NumcodecsMeta() | PluginMeta():
            return {"name": meta.name, "configuration": dict(meta.configuration)}
        case _:  # (an empty configuration is written: vlen-utf8's as zarr-python writes it; tuples as lists)
            config = msgspec.json.decode(msgspec.json.encode(meta))
            return {"name": meta.name, "configuration": {k: v for k, v in config.items() if v is not None}}


def codecs_to_json(metas: Sequence[CodecMeta]) -> list[dict[str, Any]]:
    """The canonical writer form: always objects, never ``must_understand``, every parameter written."""
    return [_to_json(m) for m in metas]
