"""A store in a single ``.zip`` file."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import threading
import time
import warnings
import weakref
import zipfile
import zlib
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from rectizarr._util import in_forked_child
from rectizarr.errors import StoreError
from rectizarr.stores.base import Capabilities, Store
from rectizarr.stores.keys import Buffer, ByteRange, resolve_range


@dataclass(slots=True, weakref_slot=True)
class _Archive:
    """State shared by a ZipStore and its read-only views."""

    zf: zipfile.ZipFile | None
    lock: threading.RLock = field(default_factory=threading.RLock)
    deleted: set[str] = field(default_factory=set)
    dirty: bool = False  # written or deleted since the central directory was last written


# The archive each open writable ZipStore of this process writes, by path: a second writer of one archive
# (zip has one) is refused. Two wrote over each other's central directories: one array lost, no error.
_writers: dict[str, weakref.ref[_Archive]] = {}
_writers_lock = threading.Lock()


@in_forked_child
def _relock() -> None:  # pragma: no cover - runs in forked children
    global _writers_lock
    _writers_lock = threading.Lock()


_DAMAGED = (OSError, zipfile.BadZipFile, NotImplementedError, EOFError)  # zipfile's errors for damaged data


def _open(path: str, mode: Literal["r", "w", "a"]) -> zipfile.ZipFile:
    """``zipfile.ZipFile`` of ``path``; a damaged archive (a bad central directory, an unknown version, a
    name that is not UTF-8) is a StoreError naming it."""
    try:
        return zipfile.ZipFile(path, mode, compression=zipfile.ZIP_STORED, allowZip64=True)
    except (*_DAMAGED, UnicodeDecodeError, ValueError) as exc:
        raise StoreError(
            f"cannot open zip archive {path!r} in mode {mode!r}: {type(exc).__name__}: {exc}"
        ) from exc


class ZipStore(Store):
    """A store in one zip archive at ``path``; ``mode`` is ``"r"`` (read), ``"w"`` (new archive,
    truncating any existing file) or ``"a"`` (append to an archive, creating it if missing).

    Values are stored uncompressed (``ZIP_STORED``: chunks are compressed by their codecs), so ranged
    reads seek straight to the bytes. **Setting a key that exists appends a newer entry of that name,
    which readers (rectizarr, zipfile, ``unzip``) use; the old bytes stay: an archive grows by the full
    size of every rewritten value.** Deleted keys disappear at once, and from the archive (with shadowed
    entries) when the store is closed or flushed. :meth:`close` (or leaving the ``with`` block) writes
    the central directory: an archive written but never closed is unreadable. Pickling a writable store
    :meth:`flush`\\ es it; the copy is read-only. A read-only view (:meth:`with_read_only`) never writes
    the archive: it pickles once the writing store is flushed, else raises :class:`StoreError`. All
    operations on one archive are serialised by a lock."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        mode: Literal["r", "w", "a"] = "r",
        *,
        coalesce_gap: int | None = None,
        coalesce_max: int | None = None,
    ) -> None:
        if mode not in ("r", "w", "a"):
            raise StoreError(
                f"invalid ZipStore mode {mode!r} for {os.fspath(path)!r}: expected 'r', 'w' or 'a'"
            )
        super().__init__(read_only=mode == "r", coalesce_gap=coalesce_gap, coalesce_max=coalesce_max)
        self.path = os.path.abspath(os.fspath(path))
        self.mode = mode
        self.lock_identity = f"zip:{self.path}:"
        with _writers_lock:
            if mode != "r":
                other = _writers.get(os.path.realpath(self.path))
                archive = None if other is None else other()
                if archive is not None and archive.zf is not None:
                    raise StoreError(
                        f"zip archive {self.path!r} is open for writing by another ZipStore of this "
                        "process; a zip archive has one writer: use that store, or close it first"
                    )
            if mode == "a" and os.path.isfile(self.path):
                # zipfile's mode 'a' takes a file whose central directory it cannot read for "not a zip" and
                # appends a new archive to it: what the damaged one held would be lost. Read it first.
                if not zipfile.is_zipfile(self.path):
                    raise StoreError(
                        f"cannot open {self.path!r} in mode 'a': it exists and is not a zip archive"
                    )
                _open(self.path, "r").close()
            self._archive = _Archive(_open(self.path, mode))
            if mode != "r":
                _writers[os.path.realpath(self.path)] = weakref.ref(self._archive)

    # a version is where the entry lies in the archive (a rewrite appends a new entry): no I/O, so a write
    # checks zarr.json against it once it holds its chunks, as in a directory
    capabilities = Capabilities(consistent_listing=True, cheap_versions=True)
    _limits_reads = True  # an entry may inflate to far more than the archive holds

    def __repr__(self) -> str:
        return f"ZipStore({self.path!r}, mode={self.mode!r}, read_only={self.read_only})"

    def __getstate__(self) -> dict[str, Any]:
        if not self.read_only:
            self.flush()
        elif self._archive.dirty:
            raise StoreError(
                f"cannot pickle a read-only view of zip archive {self.path!r}: it has changes the copy could not "
                "read; flush() or close() the writable store first"
            )
        return {"path": self.path, "coalesce_gap": self.coalesce_gap, "coalesce_max": self.coalesce_max}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state.pop("path"), "r", **state)  # type: ignore[misc]

    def _zf(self) -> zipfile.ZipFile:
        zf = self._archive.zf
        if zf is None:
            raise StoreError(f"zip archive {self.path!r} is closed")
        return zf

    def _entry(self, key: str) -> zipfile.ZipInfo | None:
        if key in self._archive.deleted:
            return None
        return self._zf().NameToInfo.get(key)

    # ---- reads ---------------------------------------------------------------------------------------

    def _get_batch(self, requests: Sequence[tuple[str, ByteRange | None]]) -> list[bytes | None]:
        with self._archive.lock:
            return [self._read(key, byte_range) for key, byte_range in requests]

    def _read(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        info = self._entry(key)
        if info is None:
            return None
        # Never an unbounded ``read()``: that inflates a whole deflated entry, however far past its declared
        # size it goes. ``read(n)`` inflates in pieces up to n bytes, and zipfile stops at the declared size
        # and checks the CRC there, so an entry that inflates past it is refused (a bad CRC). A declared
        # size past the reader's limit (what a chunk of the array, or a metadata document, can take) is
        # refused before anything is inflated: no more than the limit is ever read.
        start, end = resolve_range(byte_range or (0, None), info.file_size)
        want = end - start
        limit = self.value_limit(key)
        if limit is not None and want > limit:
            raise self._too_large(key, want, limit, f"zip archive {self.path!r} (its header's size)")
        try:
            with self._zf().open(info) as f:
                if start:
                    f.seek(start)
                return f.read(want)
        except (*_DAMAGED, RuntimeError, zlib.error, OverflowError, MemoryError) as exc:
            raise StoreError(
                f"cannot read key {key!r} from zip archive {self.path!r}: {type(exc).__name__}: {exc}"
            ) from exc

    def _info(self, key: str) -> tuple[int, Hashable] | None:
        with self._archive.lock:
            info = self._entry(key)
            return None if info is None else (info.file_size, (info.header_offset, info.file_size))

    def _keys(self) -> list[str]:
        with self._archive.lock:
            deleted = self._archive.deleted
            return [n for n in self._zf().NameToInfo if not n.endswith("/") and n not in deleted]

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        return (k for k in self._keys() if k.startswith(prefix))

    # ---- writes --------------------------------------------------------------------------------------

    def _set_batch(self, items: Mapping[str, Buffer]) -> None:
        now = time.localtime()[:6]
        with self._archive.lock:
            zf = self._zf()
            for key, value in items.items():
                view = memoryview(value).cast("B")
                info = zipfile.ZipInfo(key, date_time=now)
                info.compress_type = zipfile.ZIP_STORED
                info.file_size = view.nbytes
                with warnings.catch_warnings():
                    warnings.filterwarnings("ignore", "Duplicate name", UserWarning)
                    self._archive.dirty = True
                    with zf.open(info, "w") as dst:
                        dst.write(view)
                self._archive.deleted.discard(key)

    def _delete_batch(self, keys: Sequence[str]) -> None:
        with self._archive.lock:
            names = self._zf().NameToInfo
            gone = [k for k in keys if k in names]
            self._archive.deleted.update(gone)
            self._archive.dirty |= bool(gone)

    def _delete_prefix(self, prefix: str) -> None:
        with self._archive.lock:
            self._delete_batch([k for k in self._keys() if k.startswith(prefix)])

    # ---- finalising ----------------------------------------------------------------------------------

    def flush(self) -> None:
        """Write the central directory (dropping deleted entries) now; stays writable. Read-only: nothing."""
        if self.read_only:
            return
        with self._archive.lock:
            self._finalise()
            self._archive.zf = zipfile.ZipFile(
                self.path, "a", compression=zipfile.ZIP_STORED, allowZip64=True
            )

    def _close(self) -> None:
        with self._archive.lock:
            zf = self._archive.zf
            if zf is not None:
                self._finalise()
                zf.close()  # idempotent; needed in mode "r"
                self._archive.zf = None
        if not self.read_only:
            with _writers_lock:
                key = os.path.realpath(self.path)
                if (ref := _writers.get(key)) is not None and ref() is self._archive:
                    del _writers[key]

    def _finalise(self) -> None:
        zf = self._zf()
        self._archive.dirty = False
        if not self._archive.deleted:
            if self.mode != "r":
                zf.close()
            return
        tmp = f"{self.path}.{secrets.token_hex(8)}.tmp"
        try:
            with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as out:
                for key in self._keys():
                    info = zf.NameToInfo[key]
                    copy = zipfile.ZipInfo(key, date_time=info.date_time)
                    copy.compress_type, copy.file_size = info.compress_type, info.file_size
                    with zf.open(info) as src, out.open(copy, "w") as dst:
                        shutil.copyfileobj(src, dst)
            zf.close()
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self._archive.deleted.clear()
