"""Small helpers shared by the reliability tests."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


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
