"""C++ source text as tokens, for the C++ mutants (docs/mutation-cpp.md): identifiers, numbers, literals and punctuators with their offsets;
comments and preprocessor lines are not tokens, string, character and raw-string literals are one token each."""
from __future__ import annotations

import re
from dataclasses import dataclass

# Longest first, so `>>=` is one token and `->` never reads as `-` then `>`.
_PUNCTUATORS = sorted(["...", "<=>", "<<=", ">>=", "->*", "::", "->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=",
                       "&&", "||", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", ".*", "##"], key=len, reverse=True)
_IDENT = re.compile(r"[A-Za-z_]\w*")
_NUMBER = re.compile(r"\.?\d(?:[eEpP][+-]|[\w.']|)*")
_RAW = re.compile(r'(?:u8|u|U|L)?R"([^ ()\\\t\n]{0,16})\(')
_QUOTED = re.compile(r"""(?:u8|u|U|L)?(["'])(?:\\.|(?!\1)[^\\\n])*\1\w*""")
_SPACE = re.compile(r"(?:\s|\\\n)+")


@dataclass(frozen=True)
class Token:
    """One token: kind (`ident`, `number`, `string`, `char`, `punct`), its text, offsets into the text, 1-based line."""

    kind: str
    text: str
    start: int
    end: int
    line: int


def tokens(text: str) -> list[Token]:
    """The tokens of ``text`` in order. Comments and preprocessor lines (with their continuations) are skipped; an
    unterminated comment or literal ends at the end of the text or line rather than raising."""
    found: list[Token] = []
    at, line, line_start = 0, 1, True  # line_start: only whitespace since the last newline (a `#` starts a directive)
    size = len(text)
    while at < size:
        space = _SPACE.match(text, at)
        if space:
            chunk = space.group()
            line += chunk.count("\n")
            line_start = line_start or "\n" in chunk
            at = space.end()
            continue
        char = text[at]
        if char == "#" and line_start:
            end = at
            while True:  # a directive runs to a newline not escaped by a backslash; comments inside it end with it
                newline = text.find("\n", end)
                if newline == -1:
                    end = size
                    break
                if text[newline - 1] == "\\":
                    end = newline + 1
                    continue
                end = newline
                break
            line += text.count("\n", at, end)
            at = end
            continue
        line_start = False
        if text.startswith("//", at):
            newline = text.find("\n", at)
            at = size if newline == -1 else newline
            continue
        if text.startswith("/*", at):
            close = text.find("*/", at + 2)
            end = size if close == -1 else close + 2
            line += text.count("\n", at, end)
            at = end
            continue
        raw = _RAW.match(text, at)
        if raw:
            close = text.find(")" + raw.group(1) + '"', raw.end())
            end = size if close == -1 else close + len(raw.group(1)) + 2
            found.append(Token("string", text[at:end], at, end, line))
            line += text.count("\n", at, end)
            at = end
            continue
        quoted = _QUOTED.match(text, at)
        if quoted:
            kind = "char" if quoted.group(1) == "'" else "string"
            found.append(Token(kind, quoted.group(), at, quoted.end(), line))
            at = quoted.end()
            continue
        number = _NUMBER.match(text, at)
        if number:
            found.append(Token("number", number.group(), at, number.end(), line))
            at = number.end()
            continue
        ident = _IDENT.match(text, at)
        if ident:
            found.append(Token("ident", ident.group(), at, ident.end(), line))
            at = ident.end()
            continue
        punct = next((p for p in _PUNCTUATORS if text.startswith(p, at)), char)
        found.append(Token("punct", punct, at, at + len(punct), line))
        at += len(punct)
    return found
