"""``rectizarr virtualize``: join many arrays (or groups) along one axis into a reference set, without
copying a chunk (:mod:`rectizarr.virtual`); ``--append`` adds sources to an existing one. Reference-set
files (``.json``, ``.parq``) are also what the other commands open as a PATH (``copy`` materializes one)."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from rectizarr.errors import MetadataError
from rectizarr.stores import Store, open_store
from rectizarr.virtual import build, load_refs, write_refs
from rectizarr.virtual.refs import PARQUET_SUFFIXES

__all__ = ["add_parser", "reference_store", "run"]


def reference_store(url: str) -> Store | None:
    """A read-only store over the reference set at ``url`` (a ``.json`` file, or a ``.parq`` directory,
    read whole: fsspec's lazy Parquet reader fails on keys it does not expect, such as ``zarr.json``), or
    None when ``url`` names no reference set."""
    text = url.rstrip("/")
    local = "://" not in text and "::" not in text
    if text.endswith(".json") and (not local or os.path.isfile(text)):  # (a Zarr directory may be named so)
        return open_store("reference://", mode="r", storage_options={"fo": text})
    if text.endswith(PARQUET_SUFFIXES) and (not local or os.path.isdir(text)):
        return open_store(load_refs(text), mode="r")
    return None


def _axis(text: str) -> int | str:
    try:
        return int(text)
    except ValueError:
        return text


def _json_option(text: str | None, name: str) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MetadataError(f"{name} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise MetadataError(f"{name} must be a JSON object")
    return value


def run(args: argparse.Namespace) -> int:
    sources = [args.output, *args.sources] if args.append else list(args.sources)
    if args.append and not os.path.exists(args.output) and "://" not in args.output:
        raise MetadataError(f"--append: {args.output} does not exist (build it without --append first)")
    side = "inline" if args.inline else args.side
    result = build(
        sources,
        _axis(args.axis),
        side_store=side,
        storage_options=_json_option(args.storage_options, "--storage-options"),
        ref_options=_json_option(args.ref_options, "--ref-options"),
    )
    write_refs(result.refs, args.output)
    chunks = sum(1 for k in result.refs["refs"] if not k.endswith("zarr.json"))
    where = "the reference set, inline" if side == "inline" else side
    print(
        f"{args.output}: {result.sources} source(s), {len(result.joined)} array(s) joined, {chunks} chunk "
        f"reference(s); {result.rewritten} edge chunk(s) rewritten"
        f"{f' (into {where})' if result.rewritten else ''}, {result.prefixes} referenced as a byte prefix"
    )
    return 0


def add_parser(sub: Any) -> None:
    """Register the ``virtualize`` command on the subparsers ``sub``."""
    sp = sub.add_parser(
        "virtualize", help="join arrays or groups along an axis into a reference set (no copy)"
    )
    sp.add_argument(
        "sources",
        nargs="+",
        metavar="SOURCE",
        help="arrays or groups (paths, URLs) or reference sets (.json, .parq), in order",
    )
    sp.add_argument("-o", "--output", required=True, metavar="REFS", help="the reference set (JSON)")
    sp.add_argument("--axis", default="0", metavar="N|NAME", help="axis number, or dimension name (groups)")
    sp.add_argument(
        "--side",
        default=None,
        metavar="DIR",
        help="where edge chunks rewritten at their true size go (a path or URL)",
    )
    sp.add_argument("--inline", action="store_true", help="embed rewritten edge chunks in the reference set")
    sp.add_argument("--append", action="store_true", help="add SOURCEs to the end of the existing REFS")
    sp.add_argument("--storage-options", default=None, metavar="JSON", help="fsspec options of source URLs")
    sp.add_argument(
        "--ref-options",
        default=None,
        metavar="JSON",
        help="options of reference-set sources' filesystem (remote_protocol, remote_options)",
    )
    sp.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    sp.set_defaults(func=run)
