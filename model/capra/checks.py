"""What a number, a shape, a tensor and an input feed must be: the one set of checks every entry
point of the compiler uses (graph construction, ``compile_graph``, calibration, quantization and
the run-time inputs of ``run`` / ``ext_image`` / the integer reference).

Why one place: a check written where a value comes in is easy to forget at the next entry, and the
failures it should stop are silent. Every comparison with NaN is false, so ``max(0.0, nan)`` is
0.0, ``nan > 0`` is False and a NaN weight used to give its tensor the scale 1.0; ``int(2.7)`` made
a shape of 2.7 quietly into 2; a reshape turned a transposed feed into a different matrix. Here a
value is either what it should be or an error that names it.

Each helper takes ``what`` (the start of the message: "const 'w'", "calibration set 0: input
'x'") and ``error``, the class to raise: GraphError while a graph is built, CompileError while it
is compiled, ValueError at run time. All of them are ValueErrors.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

# dtype kinds a float tensor may be given in: signed, unsigned integers and floats (not bool,
# complex, strings or objects, which numpy would convert, truncate or refuse in surprising ways)
_REAL_KINDS = "iuf"


def is_number(value) -> bool:
    """A real number that is not a bool (True is an int to Python, never a range or a scale)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)


def number(value, what: str, error: type[Exception] = ValueError, positive: bool = False) -> float:
    """``value`` as a finite float (and > 0 if ``positive``), else ``error`` naming ``what``."""
    if not is_number(value):
        raise error(f"{what} must be a number, got {value!r}")
    x = float(value)
    if not math.isfinite(x):
        raise error(f"{what} must be finite, got {x!r}")
    if positive and not x > 0:
        raise error(f"{what} must be > 0, got {x!r}")
    return x


def integer(value, what: str, low: int = 0, error: type[Exception] = ValueError) -> int:
    """An integer >= low, as an int: numpy integers are taken, a bool or a float such as 2.0 or 2.7
    is refused (a count or a size that arrives as one is a mistake upstream)."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
        raise error(f"{what} must be an integer, got {value!r}")
    if value < low:
        raise error(f"{what} must be >= {low}, got {value!r}")
    return int(value)


def flag(value, what: str, error: type[Exception] = ValueError) -> bool:
    """True or False (a numpy bool taken), as a bool: a string such as "no", or 1, would read as
    true where a flag is tested, so it is refused."""
    if not isinstance(value, bool | np.bool_):
        raise error(f"{what} must be True or False, got {value!r}")
    return bool(value)


def dimension(value, what: str, error: type[Exception] = ValueError) -> int:
    """A tensor dimension: an integer >= 1."""
    return integer(value, what, 1, error)


def shape2(value, what: str, error: type[Exception] = ValueError) -> tuple[int, int]:
    """A 2-D shape (rows, columns) of positive integers."""
    if not isinstance(value, tuple | list) or len(value) != 2:
        raise error(f"{what}: the shape must be (rows, columns), got {value!r}")
    return dimension(value[0], f"{what}: rows", error), dimension(value[1], f"{what}: columns", error)


def finite_array(value, what: str, error: type[Exception] = ValueError) -> np.ndarray:
    """``value`` as a float64 array whose every element is finite, else ``error`` naming ``what``,
    the first bad element's index and how many there are."""
    try:
        raw = np.asarray(value)
    except ValueError as e:  # ragged rows
        raise error(f"{what} is not a rectangular array of numbers ({e})") from None
    if raw.dtype.kind not in _REAL_KINDS:
        raise error(f"{what} must hold real numbers, got dtype {raw.dtype}")
    arr = raw.astype(np.float64, copy=False)
    bad = ~np.isfinite(arr)
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise error(f"{what} holds {arr[first]} at index {first} ({int(bad.sum())} of {arr.size} values are "
                    f"not finite)")
    return arr


def feed(value, shape: tuple[int, int], what: str, error: type[Exception] = ValueError,
         expects: str = "the graph expects") -> np.ndarray:
    """An input's value: exactly ``shape`` (one row may also be given as a flat list), finite.

    No reshape beyond that: a (4, 2) feed for a (2, 4) input is a different matrix, not the same
    values in another layout, so it is an error rather than a silent reinterpretation."""
    arr = finite_array(value, what, error)
    rows, cols = shape
    if rows == 1 and arr.shape == (cols,):
        arr = arr.reshape(1, cols)
    if arr.shape != (rows, cols):
        got = f"{arr.size} values" if arr.size != rows * cols else f"shape {arr.shape}"
        raise error(f"{what} has {got}, {expects} {rows} x {cols}")
    return arr
