"""A linear-time string-literal pattern for xDSL's MLIR lexer, and why it is installed globally.

xDSL 0.74 matches a string literal with `"(?:[^"\\\n\v\f]+|\\...)*"`: a repetition inside a
repetition, which on an unterminated literal (a `.mlir` file cut off inside a `cuda.kernel`
source string) backtracks exponentially, so a truncated file hangs the parser for minutes
instead of failing. The same pattern with possessive repetitions never backtracks, and the
lexer's own "End of file reached before closing string literal" error comes at once.

The patch replaces a class attribute of xDSL's `MLIRLexer`, so it holds for every parser in
the process, xDSL's own included; it is installed when `deplodock.dialects` is imported (no
deplodock IR can be parsed before: `make_context` lives there). It stays global on purpose:

- every parse of deplodock IR needs it, and parsers are built in places deplodock does not
  own: `xdsl-opt`'s frontend (which `deplodock-opt` runs), and any user or test that writes
  the xDSL idiom `Parser(make_context(), text)`. Scoping it to deplodock's own call sites
  would leave those with the hang;
- it cannot change what any parser accepts: the two alternatives start with disjoint
  characters (a plain character, or a backslash) and neither is the closing quote, so giving
  back a character or an iteration never lets the closing quote match. Possessive matching
  therefore finds the same literals, ending at the same place, as xDSL's pattern
  (`tests/dialects/test_lexer.py` checks both on every short string). Only the time to
  reject a bad literal changes.

`XDSL_STRING_LITERAL` is the pattern it replaces; when an xDSL upgrade changes that, the test
says so, and the patch is to be dropped or redone.
"""

from __future__ import annotations

import re

from xdsl.utils.mlir_lexer import MLIRLexer

STRING_LITERAL = re.compile(r'"(?:[^"\\\n\v\f]++|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*+"')

#: xDSL's own pattern, as this module found it.
XDSL_STRING_LITERAL: re.Pattern[str] = MLIRLexer.__dict__["_unescaped_characters_regex"]


def install() -> None:
    MLIRLexer._unescaped_characters_regex = STRING_LITERAL
