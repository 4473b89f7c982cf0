"""Helpers shared by the `tensor` ops: shapes and element types of tensor types."""

from __future__ import annotations

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute


def shape_of(t: Attribute) -> tuple[int, ...]:
    assert isinstance(t, TensorType)
    return tuple(t.get_shape())


def element_type(t: Attribute) -> Attribute:
    """Element type of a tensor type (asserted)."""
    assert isinstance(t, TensorType), f"expected a tensor type, got {t}"
    return t.get_element_type()
