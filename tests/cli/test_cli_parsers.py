"""The command's small parsers and planners: selections (against NumPy), chunk specs, sizes, regions."""

from __future__ import annotations

import io

import numpy as np
import pytest

import rectizarr
from rectizarr.cli.util import (
    Progress,
    compact_sizes,
    parse_chunks,
    parse_selection,
    parse_size,
    plan_regions,
    rle_sizes,
)
from rectizarr.errors import SelectionError

X = np.arange(6 * 7 * 5).reshape(6, 7, 5)

# (selection text, the same selection written as Python) — the Python form is the oracle.
SELECTIONS = [
    ("...", np.s_[...]),
    ("", np.s_[...]),
    ("5", np.s_[5]),
    ("-1", np.s_[-1]),
    ("::-1", np.s_[::-1]),
    ("1:4, ::2", np.s_[1:4, ::2]),
    (" 1 : 4 , : : 2 ".replace(" : : ", "::"), np.s_[1:4, ::2]),
    ("-5:-1:2, 3", np.s_[-5:-1:2, 3]),
    ("0, None, 1:3", np.s_[0, None, 1:3]),
    ("newaxis, ..., 0", np.s_[None, ..., 0]),
    ("[0, 2, 5]", np.s_[[0, 2, 5]]),
    ("[1,3], 2", np.s_[[1, 3], 2]),
    ("..., 0", np.s_[..., 0]),
    ("1, [0,2], ::-2", np.s_[1, [0, 2], ::-2]),
    ("[True,False,True,False,True,False]", np.s_[[True, False, True, False, True, False]]),
    ("2,", np.s_[2,]),
    ("-2:, np.newaxis, ..., [1,2]", np.s_[-2:, None, ..., [1, 2]]),
    ("[-1, 0]", np.s_[[-1, 0]]),
    (":", np.s_[:]),
    ("Ellipsis, 4", np.s_[..., 4]),
]


@pytest.mark.parametrize(("text", "expected"), SELECTIONS, ids=[t or "<empty>" for t, _ in SELECTIONS])
def test_selection_parser_matches_numpy(text: str, expected: object) -> None:
    sel = parse_selection(text)
    assert np.array_equal(X[sel], X[expected])  # type: ignore[index]
    assert X[sel].shape == X[expected].shape  # type: ignore[index]


@pytest.mark.parametrize(("text", "expected"), SELECTIONS, ids=[t or "<empty>" for t, _ in SELECTIONS])
def test_selection_parser_on_rectizarr_matches_numpy(text: str, expected: object) -> None:
    a = rectizarr.from_array(rectizarr.MemoryStore(), X, chunks=[[2, 4], 3, 5])
    got = np.asarray(a[parse_selection(text)])
    assert got.shape == X[expected].shape  # type: ignore[index]
    assert np.array_equal(got, X[expected])  # type: ignore[index]


@pytest.mark.parametrize(
    "bad", ["1:2:3:4", "a", "__import__('os')", "[1, x]", "1,,2", "[1, 2", "1]", "1.5", "os.system('true')"]
)
def test_selection_parser_rejects_without_eval(bad: str) -> None:
    with pytest.raises(SelectionError, match="cannot parse selection"):
        parse_selection(bad)


def test_chunk_spec_parser() -> None:
    assert parse_chunks("10,20") == [10, 20]
    assert parse_chunks("[31,28,31,30x2],100") == [[31, 28, 31, [30, 2]], 100]  # runs stay runs
    assert parse_chunks(" [ 3 , 3 , 1 ] , 5 ") == [[3, 3, 1], 5]
    assert parse_chunks("[1x365]") == [[[1, 365]]]
    assert parse_chunks("[1x1000000000000000000]") == [[[1, 10**18]]]  # (was a list of that many ints)
    for bad in ["", "0", "[0]", "[3x0]", "a,1", "[1,2", "1,,2", "[1.5]", "-3"]:
        with pytest.raises(ValueError):
            parse_chunks(bad)


def test_compact_sizes_round_trips_through_the_chunk_spec() -> None:
    days = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
    text = compact_sizes(days)
    assert text == "[31,28,31,30,31,30,31x2,30,31,30,31]"
    assert parse_chunks(text) == [[31, 28, 31, 30, 31, 30, [31, 2], 30, 31, 30, 31]]
    assert compact_sizes((1,) * 365) == "[1x365]"
    assert "..." in compact_sizes(tuple(range(1, 100)))
    assert rle_sizes((31, 28, 31, 31, 30)) == [31, 28, [31, 2], 30]


def test_parse_size() -> None:
    assert parse_size("4096") == 4096
    assert parse_size("64M") == 64 << 20
    assert parse_size("1.5k") == 1536
    assert parse_size("2GiB") == 2 << 30
    with pytest.raises(ValueError, match="cannot parse size"):
        parse_size("lots")


def _covers(regions: list[tuple[slice, ...]], shape: tuple[int, ...]) -> bool:
    hits = np.zeros(shape, int)
    for r in regions:
        hits[r] += 1
    return bool((hits == 1).all())


def test_regions_are_whole_destination_chunks_and_cover_once() -> None:
    days = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    shape = (365, 8)
    # destination monthly, source daily: one month per region under a small budget
    regions = plan_regions(shape, [days, [8]], [[1] * 365, [8]], 4, 31 * 8 * 4)
    assert [r[0].stop - r[0].start for r in regions] == days
    assert _covers(regions, shape)
    # destination daily, source monthly: the shared (monthly) boundaries are used when they fit ...
    regions = plan_regions(shape, [[1] * 365, [8]], [days, [8]], 4, 31 * 8 * 4)
    assert [r[0].stop - r[0].start for r in regions] == days
    # ... and a budget below one month falls back to destination chunks
    regions = plan_regions(shape, [[1] * 365, [8]], [days, [8]], 4, 1)
    assert len(regions) == 365 and _covers(regions, shape)
    # a large budget merges regions, still on destination boundaries
    regions = plan_regions(shape, [days, [8]], [[1] * 365, [8]], 4, 1 << 30)
    assert regions == [(slice(0, 365), slice(0, 8))]
    assert plan_regions((0, 5), [[], [5]], [[], [5]], 4, 100) == []
    assert plan_regions((), [], [], 4, 100) == [()]


def test_regions_merge_inner_axes_first() -> None:
    regions = plan_regions((10, 10, 10), [[2] * 5] * 3, [[2] * 5] * 3, 1, 200)
    assert all(r[2] == slice(0, 10) for r in regions)  # the last axis merged whole
    assert _covers(regions, (10, 10, 10))
    assert max((r[0].stop - r[0].start) * (r[1].stop - r[1].start) * 10 for r in regions) <= 200


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_draws_only_on_a_terminal() -> None:
    tty, pipe = _Tty(), io.StringIO()
    for stream in (tty, pipe):
        bar = Progress("copy", 4, stream=stream)
        for _ in range(4):
            bar.advance()
        bar.close()
    assert "4/4" in tty.getvalue() and tty.getvalue().endswith("\n")
    assert pipe.getvalue() == ""
