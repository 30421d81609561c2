"""The refusals of :func:`rectizarr.virtual.concat`: raised while planning, before anything is written.

Each names the source (its position and what it was given as) and the metadata field at fault::

    ConcatError(MetadataError)                 the arguments themselves (no sources, an axis out of range)
     +- SourceMismatchError(ConcatError)       data_type, codecs, fill_value, shape or chunk_grid differ
     +- UnreferenceableError(ConcatError)      a chunk that no reference can point to (a store without a
                                               URL, bytes compressed as a whole shard, a chunk key that
                                               does not map, rewritten edge chunks but no side store)"""

from __future__ import annotations

from rectizarr.errors import MetadataError

__all__ = ["ConcatError", "SourceMismatchError", "UnreferenceableError"]


class ConcatError(MetadataError):
    """A virtual concatenation that cannot be built; ``source`` and ``field`` say where (None: the call)."""

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        field: str | None = None,
        path: str | None = None,
        key: str | None = None,
    ) -> None:
        self.source, self.field = source, field
        where = ", ".join(w for w in (source and f"source {source}", field and f"field {field!r}") if w)
        super().__init__(f"{where}: {message}" if where else message, path=path, key=key)


class SourceMismatchError(ConcatError):
    """A source whose metadata differs from the first source's where it must agree."""


class UnreferenceableError(ConcatError):
    """A source (or one of its chunks) that references cannot point to."""
