"""rectizarr.validate on the conformance corpus and on deliberately broken stores."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rectizarr
from rectizarr.validate import Issue, ValidationReport
from tests.conformance.corpus import Case, all_cases, invalid_cases

CASES = [c for c in all_cases() if "expect_error" not in c.info]
REFUSED = [c for c in all_cases() if "expect_error" in c.info]
INVALID = invalid_cases()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_corpus_case_is_clean_in_lenient_mode(case: Case) -> None:
    report = rectizarr.validate(case.store, strict=False)
    assert report.ok, report.format_text()
    assert report.nodes_checked >= 1


@pytest.mark.parametrize("case", REFUSED, ids=lambda c: c.id)
def test_refused_corpus_case_is_reported(case: Case) -> None:
    report = rectizarr.validate(case.store, strict=False)
    assert not report.ok
    assert {i.json_path for i in report.errors} & {"$.data_type", "$.fill_value"}


@pytest.mark.parametrize(("case_dir", "expected"), INVALID, ids=[d.name for d, _ in INVALID])
def test_invalid_case_is_reported(case_dir: Path, expected: dict[str, Any]) -> None:
    for strict in (True, False):
        report = rectizarr.validate(case_dir / "data.zarr", strict=strict)
        assert not report.ok, f"{case_dir.name} validated clean"
        if expected["stage"] == "read":
            rule = "chunks.checksum" if expected["error"] == "ChecksumError" else "chunks.decode"
            assert any(i.rule == rule and i.key.startswith("c") for i in report.errors), report.format_text()
        else:
            assert any(i.key == "zarr.json" for i in report.errors), report.format_text()
            if "json_path" in expected:
                assert expected["json_path"] in {i.json_path for i in report.errors}, report.format_text()
            if expected["error"] == "UnsupportedError":
                assert any(i.rule.endswith(".unsupported") or i.rule == "zarr_format" for i in report.errors)


def test_strict_mode_reports_stray_keys_as_errors() -> None:
    case = next(c for c in CASES if c.id == "handwritten/stray_keys")
    lenient = rectizarr.validate(case.store, strict=False)
    strict = rectizarr.validate(case.store)
    assert lenient.ok and not strict.ok
    assert sorted(i.key for i in strict.errors) == case.info["stray_keys"]
    assert {i.rule for i in strict.errors} == {"chunks.stray_key", "chunks.outside_grid"}
    assert [i.key for i in lenient.warnings] == [i.key for i in strict.errors]
    assert lenient.chunks_checked == 2


@pytest.mark.parametrize(
    "case_id",
    [
        "handwritten/blosc_missing_typesize",
        "handwritten/int_fill_float_literal",
        "zarr-python/attributes_bare_nan",
    ],
)
def test_lenient_metadata_is_an_error_only_when_strict(case_id: str) -> None:
    case = next(c for c in CASES if c.id == case_id)
    assert rectizarr.validate(case.store, strict=False).warnings
    strict = rectizarr.validate(case.store, strict=True)
    assert not strict.ok
    assert all(i.rule.endswith(".lenient") or i.rule == "json.nonfinite" for i in strict.errors)


def test_stale_consolidated_metadata_and_reserved_names() -> None:
    case = next(c for c in CASES if c.id == "handwritten/group_stale_consolidated")
    report = rectizarr.validate(case.store, strict=False)
    rules = {(i.key, i.rule) for i in report.warnings}
    assert ("zarr.json", "consolidated.stale") in rules
    assert ("__ext/zarr.json", "hierarchy.node_name") in rules


def _copy(case_id: str, tmp_path: Path) -> Path:
    case = next(c for c in CASES if c.id == case_id)
    dst = tmp_path / "copy.zarr"
    shutil.copytree(case.store, dst)
    return dst


def test_corrupted_chunk_is_reported(tmp_path: Path) -> None:
    store = _copy("zarr-python/crc32c", tmp_path)
    chunk = store / "c" / "1"
    data = bytearray(chunk.read_bytes())
    data[0] ^= 0xFF
    chunk.write_bytes(bytes(data))
    report = rectizarr.validate(store)
    assert [(i.key, i.rule) for i in report.errors] == [("c/1", "chunks.checksum")]
    assert "c/1" in report.format_text()


def test_corrupted_inner_chunk_of_a_shard_is_reported(tmp_path: Path) -> None:
    store = _copy("zarr-python/shard_inner_zstd", tmp_path)
    shard = store / "c" / "0"
    data = bytearray(shard.read_bytes())
    index = np.frombuffer(bytes(data[-(16 * 4 + 4) : -4]), "<u8").reshape(4, 2)
    offset = int(index[2, 0])
    data[offset : offset + 4] = b"\0\0\0\0"  # break the third inner chunk's zstd magic number
    shard.write_bytes(bytes(data))
    report = rectizarr.validate(store)
    assert report.errors and report.errors[0].key == "c/0"
    assert report.errors[0].rule in ("chunks.decode", "chunks.checksum")


def test_stray_key_is_reported(tmp_path: Path) -> None:
    store = _copy("zarr-python/ndim_3", tmp_path)
    (store / "c" / "9").mkdir()
    (store / "c" / "9" / "0").mkdir()
    (store / "c" / "9" / "0" / "0").write_bytes(b"x")
    (store / "README").write_bytes(b"hello")
    report = rectizarr.validate(store, strict=False)
    assert report.ok
    assert {(i.key, i.rule) for i in report.warnings} == {
        ("c/9/0/0", "chunks.outside_grid"),
        ("README", "chunks.stray_key"),
    }


def test_every_deviation_is_reported_with_its_path(tmp_path: Path) -> None:
    store = tmp_path / "bad.zarr"
    store.mkdir()
    doc = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [4, 4],
        "data_type": "int16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 2]}},
        "chunk_key_encoding": {"name": "default"},
        "fill_value": 1.5,
        "codecs": [{"name": "gzip", "configuration": {"level": 1}}, {"name": "bytes"}],
        "dimension_names": ["x"],
        "foo": 1,
        "storage_transformers": [{"name": "t"}],
    }
    (store / "zarr.json").write_text(json.dumps(doc))
    report = rectizarr.validate(store)
    paths = {i.json_path for i in report.errors}
    assert {"$.fill_value", "$.dimension_names", "$.foo", "$.storage_transformers[0]"} <= paths
    assert any(p.startswith("$.codecs") for p in paths)
    assert len(report.errors) >= 5


def test_hierarchy_rules(tmp_path: Path) -> None:
    g = rectizarr.create_group(tmp_path / "h.zarr")
    a = g.create_array("arr", shape=(4,), dtype="u1", chunks=(2,))
    a[:] = np.arange(4, dtype="u1")
    implicit = tmp_path / "h.zarr" / "implicit" / "child"
    implicit.mkdir(parents=True)
    (implicit / "zarr.json").write_text(json.dumps({"zarr_format": 3, "node_type": "group"}))
    inside = tmp_path / "h.zarr" / "arr" / "nested"
    inside.mkdir()
    (inside / "zarr.json").write_text(json.dumps({"zarr_format": 3, "node_type": "group"}))
    report = rectizarr.validate(tmp_path / "h.zarr", strict=False)
    rules = {(i.key, i.rule) for i in report.errors}
    assert ("implicit/child/zarr.json", "hierarchy.implicit_group") in rules
    assert ("arr/nested/zarr.json", "hierarchy.inside_array") in rules
    sub = rectizarr.validate(tmp_path / "h.zarr", path="arr", strict=False)
    assert sub.chunks_checked == 2


def test_report_serialises() -> None:
    report = ValidationReport(
        errors=[Issue("c/0", "", "chunks.decode", "bad")],
        warnings=[Issue("zarr.json", "$.x", "must_understand.lenient", "hm")],
    )
    obj = json.loads(report.to_json())
    assert obj["ok"] is False
    assert obj["errors"][0] == {"key": "c/0", "json_path": "", "rule": "chunks.decode", "message": "bad"}
    text = report.format_text().splitlines()
    assert text[0] == "error: c/0 [chunks.decode] bad"
    assert text[1] == "warning: zarr.json $.x [must_understand.lenient] hm"
    assert text[-1].startswith("INVALID: 1 error(s), 1 warning(s)")


def test_missing_root_and_missing_directory(tmp_path: Path) -> None:
    (tmp_path / "empty.zarr").mkdir()
    report = rectizarr.validate(tmp_path / "empty.zarr")
    assert [i.rule for i in report.errors] == ["hierarchy.missing_node"]
    with pytest.raises(FileNotFoundError):
        rectizarr.validate(tmp_path / "nope.zarr")


_BYTES = {"name": "bytes", "configuration": {"endian": "little"}}


def _doc(**over: Any) -> bytes:
    doc = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [4],
        "data_type": "int32",
        "fill_value": 0,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
        "chunk_key_encoding": {"name": "default"},
        "codecs": [_BYTES],
        **over,
    }
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("key", "data"),
    [
        ("zarr.json", b'{"\xff": 1}'),  # not UTF-8
        ("zarr.json", b"[" * 100_000),  # nested past the recursion limit
        (".zgroup", b"[" * 100_000),
        (".zarray", b"[" * 100_000),
        (
            "zarr.json",
            _doc(
                codecs=[
                    {
                        "name": "sharding_indexed",
                        "configuration": {
                            "chunk_shape": ["\ud800"],
                            "codecs": [_BYTES],
                            "index_codecs": [_BYTES],
                            "index_location": "end",
                        },
                    }
                ]
            ),
        ),
    ],
)
def test_validate_reports_undecodable_documents_and_never_raises(key: str, data: bytes) -> None:
    store = rectizarr.MemoryStore()
    store.set(key, data)
    report = rectizarr.validate(store)
    assert not report.ok and [e.rule for e in report.errors][:1] == ["json.syntax"]


def test_validate_checks_a_huge_declared_chunk_without_allocating_it() -> None:
    """Declared chunk of 2 x 2**40 x 2 int32 (16 TiB), 16 bytes stored: a decode error, no 16 TiB output."""
    store = rectizarr.MemoryStore()
    store.set(
        "zarr.json",
        _doc(
            shape=[4, 2**42, 2],
            chunk_grid={"name": "regular", "configuration": {"chunk_shape": [2, 2**40, 2]}},
        ),
    )
    store.set("c/0/0/0", b"\0" * 16)
    report = rectizarr.validate(store)
    assert [(e.key, e.rule) for e in report.errors] == [("c/0/0/0", "chunks.decode")]
