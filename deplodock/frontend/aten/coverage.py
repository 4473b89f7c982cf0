"""The Core ATen ops deplodock refuses, each with its reason (everything else lowers)."""

from __future__ import annotations

REFUSED: dict[str, str] = {
    "aten.nonzero.default": "data-dependent output shape",
    "aten._local_scalar_dense.default": "a tensor read as a Python number (`.item()`): data-dependent",
    "aten.rand.default": "random numbers inside the model",
    "aten.randn.default": "random numbers inside the model",
    "aten.randperm.default": "random numbers inside the model",
    "aten._fft_r2c.default": "complex dtypes",
    "aten._fft_c2r.default": "complex dtypes",
    "aten.resize_.default": "resizes a tensor's storage in place",
}
