"""The README, the walkthrough and the guides show what the tool prints today, and the
guides quote the repository's code as it is (see docs_examples.py); the architecture page
gives the layers the layering test enforces and names only files that exist."""

from __future__ import annotations

import re

import pytest

from tests.docs_examples import DOCUMENTS, GUIDES, ROOT, examples, quotes, run_command

ALL_EXAMPLES = [example for document in DOCUMENTS for example in examples(document)]
GUIDE_QUOTES = [quote for guide in GUIDES for quote in quotes(guide)]


def test_documents_have_examples() -> None:
    for document in DOCUMENTS:
        assert examples(document), f"{document.name} has no console example"


@pytest.mark.parametrize(
    "example", ALL_EXAMPLES, ids=[f"{e.document.name}:{e.command[:60]}" for e in ALL_EXAMPLES]
)
def test_example_output_has_not_drifted(example) -> None:
    assert run_command(example.command) == example.output, (
        f"{example.document.name}: the output of `{example.command}` drifted; "
        "run `python tests/docs_examples.py --update` and review the diff"
    )


#: The torch-level files the documents lower with `deplodock-opt`, and what they claim to be.
TORCH_LEVEL_EXAMPLES = {
    "docs/examples/rmsnorm.mlir": "nn.RMSNorm(2048)(torch.randn(1,32,2048))",
    "docs/examples/silu_mul.mlir": "F.silu(torch.randn(1, 128, 5632)) * torch.randn(1, 128, 5632)",
}


@pytest.mark.parametrize(("path", "expression"), TORCH_LEVEL_EXAMPLES.items())
def test_example_file_is_the_torch_level_it_claims(path: str, expression: str) -> None:
    command = f'deplodock compile -c "{expression}" --ir torch'
    assert run_command(command) == (ROOT / path).read_text()


def test_guides_are_collected() -> None:
    assert GUIDES, "docs/guides/ has no guide"
    assert set(GUIDES) <= set(DOCUMENTS)


@pytest.mark.parametrize(
    "quote", GUIDE_QUOTES, ids=[f"{q.document.name}:{q.path}" for q in GUIDE_QUOTES]
)
def test_guide_code_is_the_repository_code(quote) -> None:
    assert quote.path, f"{quote.document.name}: a code block does not name its file"
    source = ROOT / quote.path
    assert source.is_file(), f"{quote.document.name}: {quote.path} does not exist"
    assert quote.code in source.read_text(), (
        f"{quote.document.name}: the code quoted from {quote.path} is not in it any more:\n"
        f"{quote.code}"
    )


ARCHITECTURE = ROOT / "docs" / "architecture.md"
LAYER_ROW = re.compile(r"^\| (?P<layer>\d) \|(?P<packages>[^|]*)\|(?P<group>[^|]*)\|$", re.M)
#: A path in backticks: at least one folder (`perf/devices.py`, `frontend/aten/`).
NAMED_PATH = re.compile(r"`((?:[\w.-]+/)+[\w.-]*)`")


def test_the_architecture_page_gives_the_layers_the_layering_test_enforces() -> None:
    from tests.test_layering import GROUPS, LAYERS

    documented: dict[str, int] = {}
    groups = []
    for row in LAYER_ROW.finditer(ARCHITECTURE.read_text()):
        packages = re.findall(r"`(\w+)`", row["packages"])
        documented |= dict.fromkeys(packages, int(row["layer"]))
        if row["group"].strip() == "one group":
            groups.append(frozenset(packages))
        elif row["group"].strip():
            groups.append(frozenset(re.findall(r"`(\w+)`", row["group"])))
    assert documented == LAYERS
    assert set(groups) == set(GROUPS)


def test_the_architecture_page_names_only_files_that_exist() -> None:
    """A path in backticks is one of the repository, or of the package (`perf/devices.py`)."""
    for name in NAMED_PATH.findall(ARCHITECTURE.read_text()):
        assert (ROOT / name).exists() or (ROOT / "deplodock" / name).exists(), name


# --- the numbers the README quotes (issue #39 item 10) ---------------------------------------
#
# The README's prose quotes numbers no console example prints whole: each is checked here
# against what it counts, so a change that moves one fails until the README says it anew.
# (The measured and modeled speeds of the GPU and performance-model sections come from
# `bench/results/`, which `bench/` regenerates.)

README = ROOT / "README.md"
WORDS = {"four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8}


def _readme(pattern: str) -> re.Match[str]:
    """The README's one match of `pattern` (prose wraps: whitespace matches any run)."""
    text = " ".join(README.read_text().split())
    found = list(re.finditer(pattern, text))
    assert len(found) == 1, f"README: {len(found)} matches of {pattern!r}"
    return found[0]


def test_readme_counts_the_dialects_it_names() -> None:
    from deplodock.passes.pipelines import STAGES

    quoted = _readme(r"through (\w+) MLIR-style dialects built on .*? \((torch(?: → \w+)+)\)")
    assert WORDS[quoted[1]] == len(STAGES)
    assert tuple(quoted[2].split(" → ")) == STAGES


def test_readme_python_and_torch_ranges_are_pyprojects() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    python = _readme(r"Python ≥ (\d+\.\d+)")[1]
    assert project["requires-python"] == f">={python}"
    low, high = _readme(r"torch range admits (\d+\.\d+)\u2013(\d+\.\d+)").groups()
    major, minor = high.split(".")
    assert f"torch>={low},<{major}.{int(minor) + 1}" in project["dependencies"]


def test_readme_sequence_lengths_are_the_slow_tests() -> None:
    from tests.models.test_long_sequences import LENGTHS

    assert int(_readme(r"every sequence length up to (\d+) tokens")[1]) == max(LENGTHS)


def test_readme_suite_size_is_the_suites() -> None:
    from bench.cases import all_cases

    text = " ".join(README.read_text().split())
    quoted = re.findall(r"\b(\d+)(?: cases per dtype|-case suite)|the (\d+) cases,", text)
    assert len(quoted) >= 3
    assert {int(a or b) for a, b in quoted} == {len(all_cases())}


@pytest.mark.slow
def test_readme_whole_model_counts_are_the_compiles() -> None:
    """`N launches of M unique kernels` is what `compile` says of the whole Qwen2.5-7B (the
    README said 369 and 16 long after they were 510 and 20), and the time quoted is not
    off by more than a factor of three."""
    from deplodock.driver import lower_program, program_from_model
    from deplodock.driver.lowering import kernel_counts

    quoted = _readme(
        r"the whole (\S+) \((\d+) layers\) compiles to CUDA in about (\d+) seconds on two "
        r"cores \((\d+) launches of (\d+) unique kernels\)"
    )
    model, layers, seconds, launches, unique = quoted.groups()
    program = program_from_model(f"Qwen/{model}")
    assert f", {layers} layers," in program.name
    lower_program(program, "cuda")
    assert kernel_counts(program.module) == (int(launches), int(unique))
    assert sum(program.timings.values()) < 3 * int(seconds)
