"""The rectizarr exception tree.

Every error rectizarr raises on purpose is a :class:`RectizarrError`. Each class also subclasses the
builtin exception that fits, so callers that already catch ``ValueError`` or ``FileNotFoundError``
keep working::

    RectizarrError(Exception)
     +- MetadataError(RectizarrError, ValueError)      malformed or inconsistent zarr.json / create args
     |   +- UnsupportedError(MetadataError)            valid Zarr that rectizarr does not implement
     |   +- NodeTypeError(MetadataError)               an array where a group is expected, or the reverse
     |   +- IrregularChunksError(MetadataError, AttributeError)   ``.chunks`` of a rectilinear grid
     +- NodeNotFoundError(RectizarrError, FileNotFoundError, KeyError)
     +- NodeExistsError(RectizarrError, FileExistsError, ValueError)   ValueError: zarr-python's ContainsArrayError
     +- ReadOnlyError(RectizarrError, PermissionError, ValueError)     ValueError: zarr-python's read-only error
     +- StoreError(RectizarrError, OSError)            invalid key, escape attempt, backend failure
     +- CodecError(RectizarrError)                     corrupt or undecodable chunk; names the store key
     |   +- ChecksumError(CodecError)
     +- ConflictError(RectizarrError)                  a read-modify-write lost to other writers every retry
     |   +- VersionChanged(ConflictError)               a value changed between two reads that must agree
     +- SelectionError(RectizarrError, IndexError)
         +- SelectionValueError(SelectionError, ValueError)   what NumPy refuses with ValueError (step 0)

A missing chunk is never an error: it reads as the fill value."""

from __future__ import annotations

__all__ = [
    "CastError",
    "ChecksumError",
    "CodecError",
    "ConflictError",
    "VersionChanged",
    "IrregularChunksError",
    "LenientMetadataWarning",
    "MetadataError",
    "NodeExistsError",
    "NodeNotFoundError",
    "NodeTypeError",
    "ReadOnlyError",
    "RectizarrError",
    "SelectionError",
    "SelectionValueError",
    "StoreError",
    "UnsupportedError",
]


class RectizarrError(Exception):
    """Base class of every error rectizarr raises on purpose."""


class MetadataError(RectizarrError, ValueError):
    """A malformed or inconsistent document or set of creation arguments: ``path`` is the JSON path of the
    offending value (``$.codecs[1].configuration.level``), ``key`` the store key of the document, if known."""

    def __init__(self, message: str, *, path: str | None = None, key: str | None = None) -> None:
        self.path, self.key, self.message = path, key, message
        where = ": ".join(w for w in (key, path) if w)
        super().__init__(f"{where}: {message}" if where else message)

    def with_key(self, key: str) -> MetadataError:
        """The same error (same class, message and JSON path) naming the store key of the document."""
        return type(self)(self.message, path=self.path, key=key)


class UnsupportedError(MetadataError):
    """Valid Zarr that rectizarr does not implement; the message names the feature."""


class NodeTypeError(MetadataError):
    """An array opened as a group, or a group as an array (zarr-python's ``ContainsArrayError``...)."""


class IrregularChunksError(MetadataError, AttributeError):
    """``Array.chunks`` (or ``.shards``) of a rectilinear grid; an ``AttributeError`` so that duck-array
    consumers probing ``getattr(a, "chunks", None)`` (dask's ``from_array``) fall back cleanly."""


class NodeNotFoundError(RectizarrError, FileNotFoundError, KeyError):
    """No node at the given path; a ``KeyError`` so that ``group["missing"]`` fails as a mapping lookup."""

    def __str__(self) -> str:  # OSError's, not KeyError's quoted form
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()


class NodeExistsError(RectizarrError, FileExistsError, ValueError):
    """A node already exists where one is being created without ``overwrite``."""


class ReadOnlyError(RectizarrError, PermissionError, ValueError):
    """A mutating operation on a read-only store, array or group."""


class StoreError(RectizarrError, OSError):
    """An invalid store key (including escape attempts) or a failure of the storage backend."""


class CodecError(RectizarrError):
    """A chunk or shard could not be decoded or encoded; the message names the store key and codec."""

    def __init__(self, message: str, *, key: str | None = None, codec: str | None = None) -> None:
        self.message, self.key, self.codec = message, key, codec
        where = ", ".join(f"{what} {name!r}" for what, name in (("chunk", key), ("codec", codec)) if name)
        super().__init__(f"{where}: {message}" if where else message)

    def with_key(self, key: str) -> CodecError:
        """The same error (same class, message and codec) naming the store key of the chunk."""
        return type(self)(self.message, key=key, codec=self.codec)


class ConflictError(RectizarrError):
    """A read-modify-write kept losing to other writers."""


class VersionChanged(ConflictError):
    """``key`` no longer holds the version a read was conditioned on (an S3 ``If-Match`` answered 412, or
    the version after the read differs): what was read with it (a shard index) is stale; read it again."""

    def __init__(self, key: str) -> None:
        super().__init__(f"{key!r} was rewritten by another writer during the read")
        self.key = key


class ChecksumError(CodecError):
    """A stored checksum (crc32c, a zstd frame's) does not match the data."""


class SelectionError(RectizarrError, IndexError):
    """An out-of-bounds or malformed selection; the message names the axis and the bound."""


class SelectionValueError(SelectionError, ValueError):
    """A selection NumPy refuses with ValueError rather than IndexError (a slice step of zero)."""


class CastError(RectizarrError, OverflowError):
    """A value written does not fit the array's data type (a date past ``datetime64[ns]``, an int past the
    integer type); nothing is written."""


class LenientMetadataWarning(UserWarning):
    """Metadata outside the spec that other implementations write: read anyway, never written by us
    (``rectizarr.validate(..., strict=True)`` reports each as an error)."""
