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
