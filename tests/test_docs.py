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
