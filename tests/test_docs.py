"""The README and the walkthrough show what the tool prints today (see docs_examples.py)."""

from __future__ import annotations

import pytest

from tests.docs_examples import DOCUMENTS, examples, run_command

ALL_EXAMPLES = [example for document in DOCUMENTS for example in examples(document)]


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


def test_walkthrough_example_file_is_the_torch_level_it_claims() -> None:
    from tests.docs_examples import ROOT

    command = 'deplodock compile -c "nn.RMSNorm(2048)(torch.randn(1,32,2048))" --ir torch'
    assert run_command(command) == (ROOT / "docs/examples/rmsnorm.mlir").read_text()
