"""Values written into a data type: strings as zarr-python casts them into its string arrays, and the check
that dates or durations fit a finer unit (split from :mod:`rectizarr.core.dtype`, which re-exports both)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from rectizarr.errors import SelectionError


def as_strings(values: np.ndarray, one: bool = False) -> np.ndarray:
    """The elements of an object array as ``str``, as zarr-python's string arrays (NumPy ``StringDType``)
    cast what is written into them: ``5`` -> ``'5'``, ``None`` -> ``'None'``, ``b'x'`` -> ``'x'``
    (UTF-8; other bytes: :class:`SelectionError`). A list, tuple or array in an element came from a
    value with more dimensions than the selection: NumPy's ValueError, unless ``one`` element is written
    (``a[0] = ["x"]`` stores ``"['x']"``, as NumPy does). Done before anything is written, so a write
    never stops half-way on an element its codec cannot encode."""
    if all(x.__class__ is str for x in values.flat):
        return values
    out = np.empty(values.shape, dtype=object)
    out.flat[:] = [
        str(x) if one and isinstance(x, list | tuple | np.ndarray) else _as_string(x) for x in values.flat
    ]
    return out


def _as_string(x: Any) -> str:
    if isinstance(x, str):
        return str(x)  # np.str_ too, which numcodecs' VLenUTF8 refuses
    if isinstance(x, list | tuple | np.ndarray):
        raise ValueError(
            "setting an array element with a sequence: the value has more dimensions than the "
            f"selection (an element is {type(x).__name__} {x!r:.40})"
        )
    if isinstance(x, bytes | bytearray | memoryview):
        try:
            return bytes(x).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SelectionError(
                f"cannot store {bytes(x)!r:.40} in a string array: not UTF-8 ({exc})"
            ) from None
    return str(x)


# the units of a fixed length, in attoseconds (years and months are not: NumPy converts them by the calendar)
_ATTOSECONDS = {
    "W": 7 * 86400 * 10**18,
    "D": 86400 * 10**18,
    "h": 3600 * 10**18,
    "m": 60 * 10**18,
    "s": 10**18,
    "ms": 10**15,
    "us": 10**12,
    "ns": 10**9,
    "ps": 10**6,
    "fs": 10**3,
    "as": 1,
}
_I64 = np.iinfo(np.int64)


def check_unit_cast(values: Any, dtype: npt.DTypeLike) -> None:
    """OverflowError where dates or durations in ``values`` (an array or a NumPy scalar) lie outside the
    range of ``dtype``'s finer unit (``datetime64[s]`` of the year 3000 into ``datetime64[ns]``). NumPy 2.5
    raises it when it casts an array; older NumPy (Python 3.11 gets 2.4) and NumPy's scalar casts wrap
    such values around into other dates, silently. Units of a fixed length (weeks to attoseconds) only."""
    dt: np.dtype[Any] = np.dtype(dtype)
    if (
        dt.kind not in "Mm"
        or not isinstance(values, np.ndarray | np.datetime64 | np.timedelta64)
        or values.dtype.kind != dt.kind
    ):
        return
    (unit, count), (src_unit, src_count) = np.datetime_data(dt), np.datetime_data(values.dtype)
    if unit not in _ATTOSECONDS or src_unit not in _ATTOSECONDS:
        return
    ratio, rest = divmod(_ATTOSECONDS[src_unit] * src_count, _ATTOSECONDS[unit] * count)
    if ratio <= 1 or rest:
        return  # the same or a coarser unit, where no value grows (or one not dividing it, 7 s into 2 s: unchecked)
    limit = _I64.max // ratio  # a value v fits where |v * ratio| <= the largest int64 (the smallest is NaT)
    ints = np.asarray(values)
    ints = ints.astype(ints.dtype.newbyteorder("="), copy=False).view(np.int64)
    outside = (ints > limit) | ((ints < -limit) & (ints != _I64.min))
    if outside.any():
        first = np.asarray(values).reshape(-1)[np.flatnonzero(outside)[0]]
        raise OverflowError(
            f"{first} is outside the range of {dt} (converting between {values.dtype} and {dt} units)"
        )
