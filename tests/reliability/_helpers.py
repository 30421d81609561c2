"""Small helpers shared by the reliability tests."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any


def snapshot(root: str | os.PathLike[str]) -> dict[str, tuple[str, int, int, str]]:
    """Every entry under ``root`` (symlinks not followed): kind, size, mtime_ns and content hash."""
    out: dict[str, tuple[str, int, int, str]] = {}
    base = Path(root)
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            st = p.lstat()
            rel = str(p.relative_to(base))
            if p.is_symlink():
                out[rel] = ("link", 0, st.st_mtime_ns, os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir", 0, st.st_mtime_ns, "")
            else:
                out[rel] = ("file", st.st_size, st.st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
    return out


def bounded(fn: Callable[[], Any], seconds: float = 10.0) -> Any:
    """``fn()`` in a daemon thread; fails (instead of hanging the suite) if it has not returned in time."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # handed back to the test
            out["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "the read blocked"
    if "error" in out:
        raise out["error"]
    return out["value"]
