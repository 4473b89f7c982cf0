"""How deplodock judges a computed output: one metric, the named tolerances, the random inputs.

Every check compares an output with its reference by `max_relative_error`: the largest
absolute difference over the largest reference magnitude, in float64, which stays meaningful
where single elements are near zero. The CPU run and the GPU check of a program (`driver`),
the tuner's correctness gate (`tune/check.py`) and its GPU re-check (`tune/measure.py`) all
call it, and all draw their inputs from `random_array`, so they cannot drift apart. Each
comparison has its own tolerance, named below with the reason for its value: they compare
different things (a program against PyTorch in float64, a candidate schedule against
deplodock itself in the same dtype), so the same number would be wrong for some of them.

```python
max_relative_error(actual, expected)           # 0.0, 3.1e-7, inf (non-finite mismatch), nan
schedule_error(actual, expected)               # the same, NaN in both a match (the tuner's)
first_mismatch(actual, expected, 1e-5)         # ((3, 1), nan, 0.5): the first bad element
random_array(rng, (4, 8), np.float32)          # standard normal; ints below index_bound
```

Numpy only: it sits below every layer (tensors are converted by their callers).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# --- the metric ------------------------------------------------------------------------------


def max_relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
    """max |actual - expected| / max |expected|: one number per output, robust near zeros.

    Where the reference is infinite, the same infinity counts as a match (PyTorch overflows
    there too). Where it is NaN nothing can be compared, so NaN there makes the error NaN,
    which no tolerance admits: a NaN weight makes both sides NaN everywhere, and that must
    not read as error 0 (`schedule_error` is the tuner's rule, where it may). Any other value
    where the reference is NaN or infinite, or a non-finite value where it is finite, makes
    the error infinite.
    """
    actual64, expected64 = _as_float64_pair(actual, expected)
    finite = np.isfinite(expected64)
    if not np.array_equal(_nonfinite_agree(actual64, expected64), np.ones_like(finite)):
        return float("inf")
    scale = max(float(np.max(np.abs(expected64[finite]), initial=0.0)), np.finfo(np.float64).tiny)
    error = np.max(np.abs(actual64[finite] - expected64[finite]), initial=0.0)
    if not np.isfinite(error):  # a NaN or infinity where the reference is finite
        return float("inf")
    if np.isnan(expected64).any():  # agreeing, so NaN against NaN: compared nothing
        return float("nan")
    return float(error / scale)


def schedule_error(actual: np.ndarray, expected: np.ndarray) -> float:
    """`max_relative_error` of one schedule of a kernel against another of the same kernel
    (the tuner's checks). There a NaN in both is the same value, not a gap in the check: an
    element neither schedule writes (buffers start poisoned with NaN) or the same undefined
    result (`log` of a negative), so it counts as a match."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    both = np.isnan(actual.astype(np.float64)) & np.isnan(expected.astype(np.float64))
    return max_relative_error(actual[~both], expected[~both])


def first_nan_pair(actual: np.ndarray, expected: np.ndarray) -> tuple[int, ...] | None:
    """The index of the first element (row-major) NaN in both: not a match, nothing compared
    (`max_relative_error`)."""
    both = np.isnan(np.asarray(actual, dtype=np.float64)) & np.isnan(
        np.asarray(expected, dtype=np.float64)
    )
    if not both.any():
        return None
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(both)), both.shape))


def first_mismatch(
    actual: np.ndarray, expected: np.ndarray, tolerance: float
) -> tuple[tuple[int, ...], float, float] | None:
    """(index, actual, expected) of the first element (row-major) off by more than
    `tolerance` relative to max |expected| or non-finite where the reference differs."""
    actual64, expected64 = _as_float64_pair(actual, expected)
    finite = np.isfinite(expected64)
    scale = max(float(np.max(np.abs(expected64[finite]), initial=0.0)), np.finfo(np.float64).tiny)
    with np.errstate(invalid="ignore"):  # divided as `max_relative_error` divides: it agrees
        off = np.abs(np.where(finite, actual64 - expected64, 0.0)) / scale > tolerance
    bad = off | ~_nonfinite_agree(actual64, expected64) | (finite & ~np.isfinite(actual64))
    if not bad.any():
        return None
    index = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), bad.shape))
    return index, float(actual64[index]), float(expected64[index])


def _as_float64_pair(actual: np.ndarray, expected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both in float64, reference values beyond the range of `actual`'s float type made
    infinite: PyTorch in that type overflows there too (`exp(1000)` in fp32 is inf)."""
    actual = np.asarray(actual)
    actual64 = actual.astype(np.float64)
    expected64 = np.asarray(expected, dtype=np.float64)
    if actual64.shape != expected64.shape:
        raise ValueError(f"shape {actual64.shape} differs from the reference {expected64.shape}")
    if np.issubdtype(actual.dtype, np.floating) and actual.dtype.itemsize < 8:
        limit = float(np.finfo(actual.dtype).max)
        with np.errstate(invalid="ignore"):
            expected64 = np.where(
                np.abs(expected64) > limit, np.sign(expected64) * np.inf, expected64
            )
    return actual64, expected64


def _nonfinite_agree(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """True where the reference is finite, or where actual is the same NaN or infinity."""
    same_nan = np.isnan(actual) & np.isnan(expected)
    same_inf = np.isinf(expected) & (actual == expected)
    return np.isfinite(expected) | same_nan | same_inf


# --- tolerances: a program against PyTorch in float64 (`run`, `run --device cuda`, fuzz) -----

#: An fp32 program without long sums: each output is a few roundings deep, each within
#: eps/2 = 6e-8 of exact, so 1e-5 leaves a hundredfold margin and still catches any wrong
#: element (off by O(1)).
FP32_TOLERANCE = 1e-5
#: An fp32 program that multiplies matrices (or attends): its sums of K terms run in another
#: order than PyTorch's, an error that grows like sqrt(K) eps (1.9e-6 measured at K = 3584),
#: so 1e-4 covers the models' K; plain TF32 products (no 3xTF32 correction) show ~2e-4 and
#: fail it, as they should.
FP32_LONG_SUM_TOLERANCE = 1e-4
#: A bf16/f16 program: the narrow type rounds at other points than PyTorch's kernels do
#: (`run -c`, `run --device cuda`, files); 1e-2 is about one bf16 ulp (2^-7) of the largest
#: element.
NARROW_FLOAT_TOLERANCE = 1e-2
#: ... or this multiple of PyTorch's own error in that type on the same inputs, when larger: a
#: chain of bf16 ops (attention: matmul, scale, mask, softmax, matmul) is off by more than
#: 1e-2 in PyTorch itself (1.1e-2 to 1.5e-2 at the suite's attention shapes), and deplodock
#: must be as accurate as PyTorch, not more.
PYTORCH_ERROR_FACTOR = 2.0
#: `run FILE.mlir`: the lowering against the file's own level, in the same dtype (only the
#: order of long sums changes in fp32; bf16/fp16 round at different points).
FILE_TOLERANCES = {"fp32": FP32_LONG_SUM_TOLERANCE, "narrow": NARROW_FLOAT_TOLERANCE}
#: A model's logits against transformers' (relative to the largest logit): every layer adds
#: its long sums, so fp32 is held to the long-sum tolerance; the narrow types compound one
#: rounding per op over whole decoder layers, bf16 (8 significant bits) more than fp16 (11).
#: The narrow values were set with the model runner (691a847), not derived from a bound.
MODEL_TOLERANCES = {"fp32": FP32_LONG_SUM_TOLERANCE, "fp16": 2e-2, "bf16": 5e-2}

# --- tolerances: a tuning candidate against deplodock itself, in the same dtype ---------------

#: The tuner's gate (`tune/check.py`): a candidate schedule against the loop-level kernel,
#: both in the CPU interpreter, which rounds every op alike on both sides, so only the order
#: of additions changes (split-K, MMA fragments, 3xTF32). That error grows like sqrt(K) * eps
#: with the sum's length K (measured: 5e-7 for K = 256, 1.9e-6 for K = 3584, about
#: 0.27 sqrt(K) eps, eps = 2^-23). An fp32 kernel gets max(CHECK_FP32_TOLERANCE,
#: SUM_ERROR_FACTOR * sqrt(K) * eps): 1e-5 up to K ~ 1700, 1.4e-5 at 3584, 3.3e-5 at 18944,
#: a 7x margin, and below the ~2e-4 that plain TF32 products show whatever K.
CHECK_FP32_TOLERANCE = 1e-5
SUM_ERROR_FACTOR = 2.0
#: ... and a bf16/f16 kernel about one ulp of the largest element (bf16: 2^-7 = 7.8e-3,
#: rounded up): what f32 sums in another order change once rounded to the narrow type.
CHECK_NARROW_TOLERANCE = 1e-2
#: The GPU re-check (`tune/measure.py`): a candidate against the reference schedule, both
#: built by nvcc and run on the GPU, after the CPU gate has passed it. It is there for what
#: only the GPU shows (a race, a miscompiled kernel), which is off by O(1); nvcc contracts
#: multiply-adds into FMAs differently per schedule, which the interpreter never does, so the
#: bounds leave room for that: 1e-4 in fp32 (for all K, no sqrt(K) rule) and a few narrow ulps.
GPU_CHECK_FP32_TOLERANCE = 1e-4
GPU_CHECK_NARROW_TOLERANCE = 2e-2

# --- random inputs ---------------------------------------------------------------------------


def random_array(
    rng: np.random.Generator, shape: Sequence[int], dtype: np.dtype, index_bound: int = 1
) -> np.ndarray:
    """Random values for an input of `dtype`, drawn from `rng` (seeded by the caller, so a
    check and its reference see the same inputs).

    Floats are standard normal (drawn in float64, then cast): never zero, so nothing
    multiplies away, and of the scale activations have. Booleans are fair coins. Integers
    are indices as often as not (token ids, a `gather`'s positions) and are drawn from
    [0, `index_bound`): the caller knows what they index; 1, the default, gives zeros, the
    one value valid as any index.
    """
    shape = tuple(shape)
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(shape).astype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    return rng.integers(0, index_bound, shape).astype(dtype)
