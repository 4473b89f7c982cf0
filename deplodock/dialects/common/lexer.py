"""A linear-time string-literal pattern for xDSL's MLIR lexer.

xDSL 0.74 matches a string literal with `"(?:[^"\\\n\v\f]+|\\...)*"`: a repetition inside a
repetition, which on an unterminated literal (a `.mlir` file cut off inside a `cuda.kernel`
source string) backtracks exponentially, so a truncated file hangs the parser for minutes
instead of failing. The same language with possessive repetitions never backtracks, and the
lexer's own "End of file reached before closing string literal" error comes at once.
Installed when `deplodock.dialects` is imported, before any tool parses.
"""

from __future__ import annotations

import re

from xdsl.utils.mlir_lexer import MLIRLexer

STRING_LITERAL = re.compile(r'"(?:[^"\\\n\v\f]++|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*+"')


def install() -> None:
    MLIRLexer._unescaped_characters_regex = STRING_LITERAL
