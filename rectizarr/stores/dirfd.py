"""The directories of a :class:`~rectizarr.stores.LocalStore`, opened as descriptors one segment at a time
from its root, for writes and deletes: a file is made, renamed or removed by name in its directory's
descriptor, so swapping a directory for a symbolic link meanwhile cannot send it out of the root. A link
met on the way is followed only into the root, checked on the opened descriptor (``/proc/self/fd`` on
Linux; elsewhere by resolving the path, which a swap between the check and the open can still fool)."""

from __future__ import annotations

import errno
import os
import stat

from rectizarr.errors import StoreError

O_DIR = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_FD_PATHS = "/proc/self/fd/" if os.path.isdir("/proc/self/fd") else None
_TRIES = 8  # a concurrent delete may remove a directory between its creation and its opening


NAME_MAX = 255  # bytes in a name, on every common file system
PATH_MAX = 4096  # bytes in a path (Linux); a longer one could be written step by step but never read


def too_long(key: str) -> StoreError:
    return StoreError(
        f"cannot store key {key!r}: it is longer than the file system allows (usually {NAME_MAX} bytes per name "
        f"and {PATH_MAX} per path); choose a shorter node or key name"
    )


def path_too_long(path: str) -> bool:
    """True if the file system cannot hold ``path``: a name over NAME_MAX bytes, or the whole over PATH_MAX."""
    return len(encoded := os.fsencode(path)) >= PATH_MAX or any(
        len(n) > NAME_MAX for n in encoded.split(b"/")
    )


def name_too_long(exc: OSError, key: str) -> StoreError | None:
    """A StoreError naming ``key`` for a name or path longer than the file system allows, else None."""
    return too_long(key) if exc.errno == errno.ENAMETOOLONG else None


class _Vanished(Exception):
    def __init__(self, directory: str) -> None:
        self.directory = directory


class Directories:
    """Descriptors of directories under ``root`` (keys ``""``, ``"a"``, ``"a/b"``), each opened once from its
    parent's; made when missing if ``create``. Close them with :meth:`close` (or a ``with`` block)."""

    def __init__(self, root: str, real_root: str, *, create: bool) -> None:
        self.root, self.real_root, self.create = root, real_root, create
        self._fds: dict[str, int] = {}
        self._retired: list[int] = []  # descriptors forgotten (their directory vanished), maybe still in use

    def __len__(self) -> int:
        return len(self._fds) + len(self._retired)

    def __enter__(self) -> Directories:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        fds, self._fds, retired, self._retired = self._fds, {}, self._retired, []
        for fd in [*fds.values(), *retired]:
            os.close(fd)

    def open(self, directory: str, key: str) -> int | None:
        """The descriptor of ``directory``; None when it is missing and not created (``key`` names the
        value it is for in errors). A directory removed while it is made is walked to again."""
        for _ in range(_TRIES):
            try:
                return self._open(directory, key)
            except _Vanished as gone:  # forget it and everything below it (closed with the others: a
                # descriptor already handed out may still be in use, and its number must not be reused)
                for d in [d for d in self._fds if d == gone.directory or d.startswith(gone.directory + "/")]:
                    self._retired.append(self._fds.pop(d))
        raise StoreError(
            f"cannot make the directory {directory!r} of key {key!r} in {self.root!r}: it keeps being removed"
        )

    def _open(self, directory: str, key: str) -> int | None:
        fd = self._fds.get(directory)
        if fd is not None:
            return fd
        if directory == "":
            fd = self._open_root()
        else:
            parent, _, name = directory.rpartition("/")
            parent_fd = self._open(parent, key)
            fd = None if parent_fd is None else self._step(parent_fd, parent, name, directory, key)
        if fd is not None:
            self._fds[directory] = fd
        return fd

    def prune(self, directory: str) -> None:
        """Remove ``directory`` and then its parents while they are empty, up to (not including) the root."""
        while directory:
            parent, _, name = directory.rpartition("/")
            parent_fd = self._fds.get(parent)
            if parent_fd is None:
                return
            try:
                os.rmdir(name, dir_fd=parent_fd)
            except OSError:
                return
            directory = parent

    def _open_root(self) -> int | None:
        for _ in range(_TRIES):
            try:
                return os.open(self.root, O_DIR)
            except FileNotFoundError:
                if not self.create:
                    return None
                os.makedirs(self.root, exist_ok=True)
            except NotADirectoryError:
                raise StoreError(f"the store root {self.root!r} is not a directory") from None
        raise StoreError(f"the store root {self.root!r} keeps disappearing")

    def _step(self, parent_fd: int, parent: str, name: str, directory: str, key: str) -> int | None:
        for _ in range(_TRIES):
            try:
                return os.open(name, O_DIR | O_NOFOLLOW, dir_fd=parent_fd)
            except FileNotFoundError:
                if not self.create:
                    return None
                try:
                    os.mkdir(name, dir_fd=parent_fd)
                except FileExistsError:  # made meanwhile, or a link or a value now: the next open tells
                    pass
                except FileNotFoundError:  # the parent was removed since it was opened
                    raise _Vanished(parent) from None
                continue
            except OSError as exc:  # a symbolic link (ELOOP) or a value (ENOTDIR), or a name too long
                if (error := name_too_long(exc, key)) is not None:
                    if not self.create:
                        return None
                    raise error from None
            try:
                mode = os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(mode):
                return self._follow(parent_fd, name, directory, key)
            if not self.create:
                return None
            raise StoreError(
                f"cannot store key {key!r}: a parent of it in {self.root!r} is a value, not a directory"
            )
        raise StoreError(
            f"cannot open the directory {directory!r} of key {key!r} in {self.root!r}: it keeps changing"
        )

    def _follow(self, parent_fd: int, name: str, directory: str, key: str) -> int | None:
        """The directory a symbolic link leads to, if it is inside the root."""
        try:
            fd = os.open(name, O_DIR, dir_fd=parent_fd)
        except (FileNotFoundError, NotADirectoryError):
            if not self.create:
                return None
            raise StoreError(
                f"cannot store key {key!r}: {directory!r} in {self.root!r} is a link to no directory"
            ) from None
        try:
            if _FD_PATHS is not None:
                real = os.readlink(f"{_FD_PATHS}{fd}")
            else:
                real = os.path.realpath(os.path.join(self.root, directory))
        except BaseException:
            os.close(fd)
            raise
        if real != self.real_root and not real.startswith(self.real_root + os.sep):
            os.close(fd)
            path = os.path.join(self.root, directory)
            raise StoreError(
                f"refusing to touch key {key!r}: {path!r} resolves to {real!r}, outside the store root {self.root!r}"
            )
        return fd

    def is_link_inside(self, parent_fd: int, name: str, directory: str, key: str) -> bool:
        """True if ``name`` in ``parent_fd`` is a symbolic link to a directory inside the root; a link out
        of it raises :class:`StoreError`; False for anything else."""
        try:
            mode = os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode
        except OSError as exc:
            if isinstance(exc, FileNotFoundError) or exc.errno == errno.ENAMETOOLONG:
                return False
            raise
        if not stat.S_ISLNK(mode):
            return False
        fd = self._follow(parent_fd, name, directory, key)
        if fd is not None:
            os.close(fd)
        return True
