"""Issue #39 item 11: the README's `pytest -q` ran for half an hour on a busy 2-core
machine. What takes seconds a test is marked `slow` (skipped unless `--run-slow`, which
`.ci/run` gives), so the default run takes minutes; the README names the kinds, and each
kind it names is marked here."""

from __future__ import annotations

import importlib
from collections.abc import Iterable

import pytest

from tests.docs_examples import ROOT

#: (module, test function or None for the whole module): one of each kind the README names.
SLOW = [
    ("tests.models.test_model_cli", "test_whole_qwen25_7b_compiles_to_loop_on_meta_tensors"),
    ("tests.models.test_tiny_llms", None),
    ("tests.fuzz.test_fuzz", "test_fixed_seed_fuzz_run_finds_no_miscompile"),
    ("tests.explorer.test_browser", None),
    ("tests.e2e.test_fusion_and_cuda", "test_emitted_cuda_compiles_for_sm90_without_spills"),
    ("tests.backend.test_gemm_sass", None),
    ("tests.passes.test_tile_row_on_chip", "test_row_on_chip_matches_pytorch_at_every_level"),
    ("tests.test_docs", "test_readme_whole_model_counts_are_the_compiles"),
]


def _names(marks: object) -> Iterable[str]:
    listed = marks if isinstance(marks, list) else [marks]
    return (mark.name for mark in listed if isinstance(mark, pytest.Mark | pytest.MarkDecorator))


@pytest.mark.parametrize(("module", "test"), SLOW, ids=[f"{m}:{t}" for m, t in SLOW])
def test_each_kind_the_readme_names_is_marked_slow(module: str, test: str | None) -> None:
    loaded = importlib.import_module(module)
    marks = getattr(getattr(loaded, test), "pytestmark", []) if test else loaded.pytestmark
    assert "slow" in _names(marks), f"{module}:{test} is not marked slow"


def test_the_cuda_level_of_the_op_matrices_is_slow_and_the_others_are_not() -> None:
    for module in ("tests.e2e.test_ops_all_levels", "tests.e2e.test_llm_ops_all_levels"):
        levels = importlib.import_module(module).LEVELS
        *others, cuda = levels
        assert cuda.values == ("cuda",) and "slow" in _names(list(cuda.marks))
        assert all(isinstance(level, str) for level in others)


def test_ci_runs_the_slow_tests_and_the_readme_says_how() -> None:
    assert "pytest -q -p no:cacheprovider --run-slow" in (ROOT / ".ci" / "run").read_text()
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "`pytest -q --run-slow` runs them too, as CI (`.ci/run`) does" in readme
