"""The string-literal pattern deplodock installs in xDSL's lexer (`dialects/common/lexer.py`)
accepts what xDSL's own accepts, ending at the same place, which is why it may be installed
for every parser in the process. (That it rejects a cut-off literal at once, where xDSL's
backtracks for minutes: `tests/cli/test_bad_input.py`.)"""

from __future__ import annotations

import itertools

from xdsl.utils.mlir_lexer import MLIRLexer

import deplodock.dialects  # noqa: F401  (installs the pattern)
from deplodock.dialects.common.lexer import STRING_LITERAL, XDSL_STRING_LITERAL

#: The characters that matter to the pattern: quote, backslash, escape letters, hex digits,
#: a line break (never inside a literal) and a plain character.
ALPHABET = '"\\nt0Fa\n'


def test_the_replaced_pattern_is_xdsl_0_74s() -> None:
    """An xDSL upgrade that changes its pattern must revisit the patch (module docstring)."""
    assert XDSL_STRING_LITERAL.pattern == r'"(?:[^"\\\n\v\f]+|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"'
    assert MLIRLexer._unescaped_characters_regex is STRING_LITERAL


def test_both_patterns_match_the_same_literals_every_short_string() -> None:
    for length in range(7):
        for chars in itertools.product(ALPHABET, repeat=length):
            text = '"' + "".join(chars)
            ours, theirs = STRING_LITERAL.match(text), XDSL_STRING_LITERAL.match(text)
            assert (ours and ours.end()) == (theirs and theirs.end()), repr(text)
