"""The ``rectizarr`` command (also ``python -m rectizarr``).

::

    rectizarr info PATH [--path NODE] [--json]           what a node is: shape, dtype, grid, codecs, bytes
    rectizarr tree PATH [--path NODE] [--depth N]        the hierarchy with shapes, dtypes and grid kinds
    rectizarr cat PATH [SELECTION] [--npy FILE]          print (or save) a NumPy-style selection
    rectizarr validate PATH [--strict|--lenient] [--json]
    rectizarr diff A B [--metadata-only] [--json]         exit 0 identical/equivalent, 1 different, 2 error
    rectizarr copy SRC DST [--chunks SPEC] [--shards SPEC|none] [--codecs JSON] [--compressor NAME]
    rectizarr migrate SRC [DST] [--dry-run] [--chunks SPEC] [--keep-v2]   Zarr v2 -> v3, in place or to DST
    rectizarr virtualize SRC... --axis N -o REFS.json [--side DIR] [--append]   join along an axis, no copy

PATH is a local directory, a ``.zip`` file, a reference set (``.json``/``.parq``) or any fsspec URL. Chunk
specs give, per axis and separated by commas, an int (regular) or a bracketed list of edges where ``VxN``
repeats ``V`` ``N`` times:
``--chunks '[31,28,31,30,31,30,31x2,30,31,30,31],100,100'`` (the form ``info`` prints). Errors print one
line, ``rectizarr: error: ...``, and exit 2; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any

import numpy as np

from rectizarr.arrays import Array
from rectizarr.cli import virtualize
from rectizarr.cli.copy import CopyOptions, copy_node
from rectizarr.cli.diff import diff_nodes
from rectizarr.cli.migrate import MigrateOptions, migrate, plan_migration
from rectizarr.cli.util import compact_sizes, parse_chunks, parse_selection, parse_size, rle_sizes
from rectizarr.core.codec_meta import codecs_to_json
from rectizarr.core.grid import Runs
from rectizarr.core.metadata import node_to_json
from rectizarr.errors import MetadataError, NodeNotFoundError, RectizarrError
from rectizarr.groups import Group
from rectizarr.groups import open as open_node
from rectizarr.stores import open_store

__all__ = ["build_parser", "info_json", "main"]

PROG = "rectizarr"


# ---------------------------------------------------------------------------------------- info
def info_json(node: Array | Group) -> dict[str, Any]:
    """The stable JSON object printed by ``rectizarr info --json``.

    Arrays: ``node_type, path, shape, data_type, fill_value, chunk_grid {kind, sharded, write_chunk_sizes,
    read_chunk_sizes, metadata}, codecs, chunk_key_encoding, dimension_names, attributes, nchunks,
    stored_chunks, stored_bytes, nbytes``; chunk sizes per axis in run-length form (an int, or
    ``[size, count]`` for repeats). Groups: ``node_type, path, attributes, consolidated, members``.
    """
    doc = node_to_json(node.metadata)
    if isinstance(node, Group):
        return {
            "node_type": "group",
            "path": "/" + node.path,
            "attributes": doc["attributes"],
            "consolidated": node.metadata.consolidated_metadata is not None,
            "members": [
                {"name": n, "node_type": "array" if isinstance(m, Array) else "group"}
                for n, m in node.members()
            ],
        }
    stored, nbytes = node.nshards_initialized, int(node.nbytes_stored)
    return {
        "node_type": "array",
        "path": "/" + node.path,
        "shape": list(node.shape),
        "data_type": doc["data_type"],
        "fill_value": doc["fill_value"],
        "chunk_grid": {
            "kind": node.grid.kind,
            "sharded": node.is_sharded,
            "write_chunk_sizes": [rle_sizes(r) for r in node.write_chunk_runs],
            "read_chunk_sizes": [rle_sizes(r) for r in node.read_chunk_runs],
            "metadata": doc["chunk_grid"],
        },
        "codecs": doc["codecs"],
        "chunk_key_encoding": doc["chunk_key_encoding"],
        "dimension_names": doc.get("dimension_names"),
        "attributes": doc["attributes"],
        "nchunks": node.nshards,
        "stored_chunks": stored,
        "stored_bytes": nbytes,
        "nbytes": int(node.nbytes),
    }


def _codec_text(c: dict[str, Any]) -> str:
    cfg = c.get("configuration")
    if not cfg:
        return str(c["name"])
    if c["name"] == "sharding_indexed":
        inner = " -> ".join(_codec_text(x) for x in cfg.get("codecs", []))
        index = " -> ".join(_codec_text(x) for x in cfg.get("index_codecs", []))
        return (
            f"sharding_indexed(chunk_shape={cfg.get('chunk_shape')}, index at {cfg.get('index_location')}; "
            f"{inner}; index: {index})"
        )
    return f"{c['name']}({', '.join(f'{k}={json.dumps(v)}' for k, v in cfg.items())})"


def _sizes_text(sizes: tuple[Runs, ...], names: Sequence[str | None] | None) -> str:
    labels = [n if n else f"axis {i}" for i, n in enumerate(names or [None] * len(sizes))]
    return "; ".join(f"{label} {compact_sizes(s)}" for label, s in zip(labels, sizes, strict=True)) or "()"


def info_text(node: Array | Group) -> str:
    """The human-readable ``rectizarr info`` output."""
    j = info_json(node)
    if isinstance(node, Group):
        members = ", ".join(f"{m['name']}{'/' if m['node_type'] == 'group' else ''}" for m in j["members"])
        return "\n".join(
            [
                f"node          : group {j['path']}",
                f"members       : {len(j['members'])}{': ' + members if members else ''}",
                f"consolidated  : {'yes' if j['consolidated'] else 'no'}",
                f"attributes    : {json.dumps(j['attributes'])}",
            ]
        )
    names = node.dimension_names
    ratio = f", {j['nbytes'] / j['stored_bytes']:.2f}x compression" if j["stored_bytes"] else ""
    return "\n".join(
        [
            f"node          : array {j['path']}",
            f"shape         : {tuple(node.shape)}",
            f"data type     : {json.dumps(j['data_type'])}",
            f"chunk grid    : {node.grid.kind}{' (sharded)' if node.is_sharded else ''}",
            f"write chunks  : {_sizes_text(node.write_chunk_runs, names)}",
            f"read chunks   : {_sizes_text(node.read_chunk_runs, names)}",
            f"codecs        : {' -> '.join(_codec_text(c) for c in codecs_to_json(node.metadata.codecs))}",
            f"fill value    : {json.dumps(j['fill_value'])}",
            f"dimensions    : {', '.join(str(n) for n in names) if names else '-'}",
            f"attributes    : {json.dumps(j['attributes'])}",
            f"stored        : {j['stored_chunks']} of {j['nchunks']} chunks, {j['stored_bytes']} bytes "
            f"(logical {j['nbytes']} bytes{ratio})",
        ]
    )


# ---------------------------------------------------------------------------------------- helpers
def _open(url: str, node: str | None) -> Array | Group:
    try:
        result: Array | Group = open_node(virtualize.reference_store(url) or url, path=node, mode="r")
    except NodeNotFoundError as exc:
        raise NodeNotFoundError(f"{url}: {exc}") from None
    return result


def _array_tree_line(a: Array) -> str:
    return f"{a.shape} {a.dtype} ({a.grid.kind}{', sharded' if a.is_sharded else ''})"


def _result_nbytes(a: Array, sel: Any) -> int | None:
    items = sel if isinstance(sel, tuple) else (sel,)
    if any(isinstance(s, list) for s in items):
        return None
    view = np.broadcast_to(np.zeros((), np.uint8), a.shape)
    try:
        return int(np.asarray(view[sel]).size) * a.dtype.itemsize
    except IndexError:
        return None  # the array itself raises the clearer error


# ---------------------------------------------------------------------------------------- commands
def _cmd_info(args: argparse.Namespace) -> int:
    node = _open(args.store, args.path)
    print(json.dumps(info_json(node), indent=2) if args.json else info_text(node))
    return 0


def _cmd_tree(args: argparse.Namespace) -> int:
    node = _open(args.store, args.path)
    if isinstance(node, Array):
        print(f"{node.name} {_array_tree_line(node)}")
    else:
        print(node.tree(max_depth=args.depth))
    return 0


def _cmd_cat(args: argparse.Namespace) -> int:
    node = _open(args.store, args.path)
    if not isinstance(node, Array):
        raise MetadataError(
            f"{args.store}: the node at {node.path or '/'!r} is a group; cat needs an array (use --path)"
        )
    sel = parse_selection(args.selection)
    size = _result_nbytes(node, sel)
    limit = parse_size(args.max_bytes)
    if size is not None and size > limit:
        raise MetadataError(
            f"the selection is {size} bytes, more than --max-bytes {args.max_bytes}; narrow "
            "it or raise the limit"
        )
    out = np.asarray(node[sel])
    if args.npy:
        np.save(args.npy, out, allow_pickle=False)
        return 0
    with np.printoptions(threshold=args.threshold):
        print(out if out.ndim else out[()])
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    from rectizarr.validate import validate

    report = validate(args.store, path=args.path, strict=args.strict)
    if args.json:
        doc: Any = report.to_json()
        print(doc if isinstance(doc, str) else json.dumps(doc, indent=2))
    else:
        print(report.format_text())
    failed = bool(report.errors) or (args.strict and bool(report.warnings))
    return 1 if failed else 0


def _cmd_diff(args: argparse.Namespace) -> int:
    a = _open(args.a, args.a_path)
    b = _open(args.b, args.b_path)
    result = diff_nodes(a, b, metadata_only=args.metadata_only, budget=parse_size(args.memory))
    print(json.dumps(result.to_json(), indent=2) if args.json else result.format_text())
    return 1 if result.verdict == "different" else 0


def _cmd_copy(args: argparse.Namespace) -> int:
    src = _open(args.src, args.src_path)
    try:
        codecs = json.loads(args.codecs) if args.codecs else None
    except json.JSONDecodeError as exc:
        raise MetadataError(f"--codecs is not valid JSON: {exc}") from None
    if codecs is not None and not isinstance(codecs, list):
        raise MetadataError("--codecs must be a JSON list of codec objects")
    shards: Any = None
    if args.shards is not None:
        shards = "none" if args.shards.strip().lower() == "none" else parse_chunks(args.shards)
    opts = CopyOptions(
        chunks=parse_chunks(args.chunks) if args.chunks else None,
        shards=shards,
        codecs=codecs,
        compressor=args.compressor,
        overwrite=args.overwrite,
        budget=parse_size(args.memory),
    )
    store = open_store(args.dst, mode="a")
    copy_node(src, store, args.dst_path.strip("/") if args.dst_path else "", opts)
    return 0


def _cmd_migrate(args: argparse.Namespace) -> int:
    opts = MigrateOptions(
        chunks=parse_chunks(args.chunks) if args.chunks else None,
        keep_v2=args.keep_v2,
        overwrite=args.overwrite,
        budget=parse_size(args.memory),
    )
    in_place = args.dst is None
    if args.dry_run:
        src = _open(args.src, args.path)
        print(
            f"migrate {args.src}{'' if in_place else ' -> ' + args.dst} "
            f"({'in place' if in_place else 'to a new root'}):"
        )
        for step in plan_migration(src, opts):
            print("  " + step.describe())
        return 0
    try:
        src = open_node(args.src, path=args.path, mode="r" if not in_place else "r+")
    except NodeNotFoundError as exc:
        raise NodeNotFoundError(f"{args.src}: {exc}") from None
    store = src.store if in_place else open_store(args.dst, mode="a")
    dst_path = src.path if in_place else (args.dst_path.strip("/") if args.dst_path else "")
    steps = migrate(src, store, dst_path, opts)
    reused = sum(s.kind == "reuse" for s in steps)
    print(
        f"migrated {len(steps)} node(s): {reused} array(s) metadata-only, "
        f"{sum(s.kind == 'reencode' for s in steps)} re-encoded, {sum(s.kind == 'group' for s in steps)} group(s)"
    )
    return 0


# ---------------------------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``rectizarr`` command."""
    p = argparse.ArgumentParser(
        prog=PROG, description="Inspect, validate, compare, copy and migrate Zarr data."
    )
    p.add_argument("--debug", action="store_true", help="show the full traceback on errors")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(sp: argparse.ArgumentParser, store: str = "store") -> None:
        sp.add_argument(store, metavar="PATH", help="local directory, .zip file or fsspec URL")
        sp.add_argument("--path", dest="path", default=None, metavar="NODE", help="node inside the store")
        sp.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)

    sp = sub.add_parser("info", help="describe an array or group")
    common(sp)
    sp.add_argument("--json", action="store_true", help="machine-readable JSON")
    sp.set_defaults(func=_cmd_info)

    sp = sub.add_parser("tree", help="show the hierarchy")
    common(sp)
    sp.add_argument("--depth", type=int, default=None, metavar="N", help="at most N levels")
    sp.set_defaults(func=_cmd_tree)

    sp = sub.add_parser("cat", help="print or export a selection")
    common(sp)
    sp.add_argument("selection", nargs="?", default=None, help="NumPy syntax, e.g. '10:20, ::2' or '...'")
    sp.add_argument("--npy", metavar="FILE", help="save the selection with numpy.save instead of printing")
    sp.add_argument("--threshold", type=int, default=1000, help="summarise beyond this many elements")
    sp.add_argument("--max-bytes", default="1G", help="refuse selections larger than this (default 1G)")
    sp.set_defaults(func=_cmd_cat)

    sp = sub.add_parser("validate", help="check a store against the Zarr v3 spec")
    common(sp)
    mode = sp.add_mutually_exclusive_group()
    mode.add_argument(
        "--strict", dest="strict", action="store_true", default=True, help="warnings fail too (default)"
    )
    mode.add_argument("--lenient", dest="strict", action="store_false", help="only errors fail")
    sp.add_argument("--json", action="store_true", help="machine-readable JSON report")
    sp.set_defaults(func=_cmd_validate)

    sp = sub.add_parser("diff", help="compare two arrays or hierarchies (exit 0 same, 1 different, 2 error)")
    sp.add_argument("a", metavar="A")
    sp.add_argument("b", metavar="B")
    sp.add_argument("--a-path", default=None, metavar="NODE", help="node inside A")
    sp.add_argument("--b-path", default=None, metavar="NODE", help="node inside B")
    sp.add_argument("--metadata-only", action="store_true", help="do not compare values")
    sp.add_argument("--json", action="store_true", help="machine-readable JSON")
    sp.add_argument("--memory", default="64M", help="approximate memory per compared region (default 64M)")
    sp.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    sp.set_defaults(func=_cmd_diff)

    sp = sub.add_parser("copy", help="re-encode and rechunk an array or hierarchy")
    sp.add_argument("src", metavar="SRC")
    sp.add_argument("dst", metavar="DST")
    sp.add_argument("--src-path", default=None, metavar="NODE", help="node inside SRC")
    sp.add_argument("--dst-path", default=None, metavar="NODE", help="node inside DST")
    sp.add_argument(
        "--chunks",
        default=None,
        metavar="SPEC",
        help="storage chunks (inner chunks when sharded), e.g. '[31,28,31,30x2],100'",
    )
    sp.add_argument("--shards", default=None, metavar="SPEC", help="shard grid, or 'none' to drop sharding")
    sp.add_argument("--codecs", default=None, metavar="JSON", help="the full codec chain as in zarr.json")
    sp.add_argument(
        "--compressor",
        choices=["zstd", "gzip", "blosc", "none"],
        default=None,
        help="replace the compressors",
    )
    sp.add_argument("--overwrite", action="store_true", help="replace an existing destination node")
    sp.add_argument("--memory", default="64M", help="approximate memory per copied region (default 64M)")
    sp.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    sp.set_defaults(func=_cmd_copy)

    sp = sub.add_parser(
        "migrate", help="convert a Zarr v2 array or hierarchy to Zarr v3 (in place or to DST)"
    )
    sp.add_argument("src", metavar="SRC")
    sp.add_argument("dst", metavar="DST", nargs="?", default=None, help="a new root (default: in place)")
    sp.add_argument("--path", default=None, metavar="NODE", help="node inside SRC")
    sp.add_argument("--dst-path", default=None, metavar="NODE", help="node inside DST")
    sp.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    sp.add_argument("--chunks", default=None, metavar="SPEC", help="rechunk every array (e.g. rectilinear)")
    sp.add_argument("--keep-v2", action="store_true", help="in place: keep the v2 documents")
    sp.add_argument("--overwrite", action="store_true", help="replace an existing destination node")
    sp.add_argument("--memory", default="64M", help="approximate memory per re-encoded region (default 64M)")
    sp.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    sp.set_defaults(func=_cmd_migrate)

    virtualize.add_parser(sub)
    return p


_CAT_VALUED = {"--path", "--npy", "--threshold", "--max-bytes"}


def _cat_argv(argv: list[str]) -> list[str]:
    """Put ``cat``'s positionals after ``--`` so a selection may start with ``-`` (``'-1, ::2'``) and may
    follow the options (argparse alone cannot do either)."""
    try:
        i = argv.index("cat")
    except ValueError:
        return argv
    if any(a not in ("--debug",) for a in argv[:i]) or "--" in argv:
        return argv
    options: list[str] = []
    positionals: list[str] = []
    rest = iter(argv[i + 1 :])
    for tok in rest:
        name = tok.split("=", 1)[0]
        if name in _CAT_VALUED:
            options.append(tok)
            if "=" not in tok:
                options.append(next(rest, ""))
        elif tok in ("--debug", "-h", "--help"):
            options.append(tok)
        else:
            positionals.append(tok)
    return [*argv[: i + 1], *options, "--", *positionals]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command with ``argv`` (default ``sys.argv[1:]``) and return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(_cat_argv(list(sys.argv[1:] if argv is None else argv)))
    except SystemExit as exc:  # --help or a usage error, already printed by argparse
        return exc.code if isinstance(exc.code, int) else 2
    try:
        status: int = args.func(args)
        return status
    except BrokenPipeError:  # e.g. `rectizarr cat ... | head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # one clear line; --debug for the traceback
        if args.debug:
            traceback.print_exc()
        print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
        return 2


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, KeyError | FileNotFoundError) and not isinstance(exc, RectizarrError):
        text = f"{type(exc).__name__}: {text}"
    return text


if __name__ == "__main__":
    sys.exit(main())
