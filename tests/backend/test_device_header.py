"""The device part of `cpu_simt.h` that a written translation unit carries (issue #39)."""

from __future__ import annotations

import pytest

from deplodock.backend.device_header import GUARD, HeaderError, device_part, unifdef

DEFINES = {"__CUDACC__": True, "DEPLODOCK_MEMCHECK": False}


def test_the_device_part_is_nvccs_side_only() -> None:
    text = device_part()
    assert text.startswith(f"#ifndef {GUARD}\n#define {GUARD}\n")
    assert text.endswith(f"#endif  // {GUARD}\n")
    assert "deplodock_simt" not in text and "DEPLODOCK_MEMCHECK" not in text  # the emulation
    assert "__CUDACC__" not in text and "#define DD_DEVICE __device__ __forceinline__" in text
    # what nvcc's device pass picks: 13, and 4 in the wgmma block (desc, fence, commit, wait)
    assert text.count("#if defined(__CUDA_ARCH__)") == 17
    for primitive in (
        "dd_cp_async_16",
        "dd_load_vector",
        "dd_mma_m16n8k16",
        "dd_ldmatrix",
        "DD_DYNAMIC_SHARED",
        "dd_tma_load_2d",
        "dd_mbarrier_wait",
        "dd_wgmma_desc",
    ):
        assert primitive in text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("#ifdef __CUDACC__\na\n#else\nb\n#endif\n", "a\n"),
        ("#if !defined(__CUDACC__)\na\n#endif\nc\n", "c\n"),
        (
            "#if defined(__CUDA_ARCH__)\na\n#elif !defined(__CUDACC__)\nb\n#endif\n",
            "#if defined(__CUDA_ARCH__)\na\n#endif\n",
        ),
        (
            "#if defined(DEPLODOCK_MEMCHECK)\na\n#elif defined(X)\nb\n#else\nc\n#endif\n",
            "#if defined(X)\nb\n#else\nc\n#endif\n",
        ),
        ("#ifdef X\n#ifdef DEPLODOCK_MEMCHECK\na\n#endif\nb\n#endif\n", "#ifdef X\nb\n#endif\n"),
        ("#if defined(X) || defined(__CUDACC__)\na\n#else\nb\n#endif\n", "a\n"),
        ("#if defined(X) && defined(__CUDACC__)\na\n#endif\n", None),
    ],
    ids=["ifdef-else", "if-not", "elif-dropped", "elif-becomes-if", "nested", "or", "and"],
)
def test_unifdef_resolves_only_what_it_knows(text: str, expected: str | None) -> None:
    """`expected` None: the text stays as it is (a condition on an unknown macro)."""
    assert unifdef(text, DEFINES) == (text if expected is None else expected)


@pytest.mark.parametrize("text", ["#if __CUDACC__ > 1\n#endif\n", "#ifdef X\n", "#endif\n"])
def test_unifdef_refuses_what_it_cannot_read(text: str) -> None:
    with pytest.raises(HeaderError):
        unifdef(text, DEFINES)
