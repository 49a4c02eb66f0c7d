"""Mutants of one C++ source text (docs/mutation-cpp.md): the operator families applied to tokens
(cpp_lexer), so comments, literals and preprocessor lines are never touched; deterministic order (line, column,
operator). Contexts where a swap would not compile or means something else are skipped: template angle brackets,
`operator<` and friends, pointer and reference declarators, stream `<<`/`>>`, `static_assert`, case labels. The
precision family drops a `static_cast<float>`/`<double>` and narrows a local `double` to `float`."""
from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass

from _vllm_gates.mutation.cpp_lexer import Token, tokens
from _vllm_gates.mutation.mutate_operators import Mutant

_ARITH = {"+": "-", "-": "+", "*": "/", "/": "*", "%": "/"}
_COMPOUND = {"+=": "-=", "-=": "+=", "*=": "/=", "/=": "*=", "%=": "/=", "<<=": ">>=", ">>=": "<<="}
_COMPARE = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="}
_BOOLEAN = {"&&": "||", "||": "&&"}
_TYPE_WORDS = {"auto", "bool", "char", "char16_t", "char32_t", "const", "constexpr", "double", "float", "int", "long",
               "short", "signed", "unsigned", "void", "volatile", "wchar_t", "typename", "struct", "class", "enum",
               "static", "inline", "mutable", "register", "extern", "thread_local", "decltype"}
_NOT_OPERAND = {"return", "case", "throw", "new", "delete", "sizeof", "alignof", "else", "do", "co_return",
                "co_yield", "operator", "template", "typedef", "using", "namespace", "goto", "default", "public",
                "private", "protected", "noexcept", "if", "while", "for", "switch", "catch"} | _TYPE_WORDS
_CONTROL = {"if", "while", "for", "switch", "catch"}
_QUALIFIERS = {"const", "noexcept", "override", "final", "mutable", "constexpr", "volatile", "&", "&&"}
_STRINGY = re.compile(r"\bto_string\b|\bstd::string\b|\bstr\(\)|\bstring_view\b|\bsubstr\b|\bwhat\(\)|\bmessage\b")
_INT = re.compile(r"(0[xX][0-9a-fA-F']+|[1-9][0-9']*|0)([uUlLzZ]*)")
_FLOAT = re.compile(r"((?:\d[\d']*)?\.?\d[\d']*(?:[eE][+-]?\d+)?\.?)([fFlL]?)")


@dataclass(frozen=True)
class _Splice:
    start: int  # offsets into the text
    end: int
    text: str
    operator: str


@dataclass(frozen=True)
class _Scope:
    """A `{` ... `}` block: what it is (function, lambda, namespace, class, enum, other) and, for a function or a
    lambda, its name and whether `return {};` may stand for a return of a value in it."""

    kind: str
    name: str = ""
    value_init_return: bool = False
    local: bool = False  # in an anonymous namespace, or a `static` function: invisible to other files


def cpp_mutants(file: str, text: str, lines: set[int] | None = None) -> list[Mutant]:
    """Every mutant of the C++ text ``text`` (the file ``file``), optionally only on ``lines`` (1-based), in order
    (line, column, operator) without duplicates; fingerprints survive edits elsewhere in the file."""
    analysis = _Analysis(text)
    raw = text.splitlines(keepends=True)
    line_starts = [0]
    for row in raw:
        line_starts.append(line_starts[-1] + len(row))
    found: list[Mutant] = []
    seen: set[str] = set()
    counts: dict[tuple[int, str], int] = {}
    try:
        splices = sorted(analysis.splices(), key=lambda s: (s[0].start, s[0].operator, s[0].end, s[0].text))
    except SyntaxError as error:  # what an operator could not read, named in the file
        raise SyntaxError(error.msg, (file, error.lineno, error.offset, error.text)) from None
    for splice, where in splices:
        line = _line_of(line_starts, splice.start)
        if lines is not None and line not in lines:
            continue
        mutated = text[:splice.start] + splice.text + text[splice.end:]
        if mutated == text or mutated in seen:
            continue
        seen.add(mutated)
        index = counts.get((line, splice.operator), 0)
        counts[(line, splice.operator)] = index + 1
        diff = "".join(difflib.unified_diff(raw, mutated.splitlines(keepends=True), f"a/{file}", f"b/{file}", n=1))
        changed = [row for row in diff.splitlines()[2:] if row[:1] in "+-"]
        digest = hashlib.sha256("\n".join([file, where, splice.operator, *changed]).encode()).hexdigest()
        found.append(Mutant(file, line, splice.operator, index, mutated, diff, digest))
    return found


def defined_functions(text: str) -> set[str]:
    """The names (last component: `Foo::bar` is `bar`) of the functions the C++ text defines that other files can
    call: not in an anonymous namespace, not `static`."""
    return {scope.name.split("::")[-1] for scope in _Analysis(text).opened.values()
            if scope.kind == "function" and not scope.local}


def _line_of(line_starts: list[int], offset: int) -> int:
    low, high = 0, len(line_starts) - 1
    while low < high:  # the last line start <= offset
        middle = (low + high + 1) // 2
        if line_starts[middle] <= offset:
            low = middle
        else:
            high = middle - 1
    return low + 1


class _Analysis:
    """One pass over a file's tokens: brackets matched, template angles marked, each token's scope and region."""

    def __init__(self, text: str):
        self.text = text
        self.toks = toks = tokens(text)
        self.match = _matching(toks)
        self._openers = {c: o for o, c in self.match.items()}
        self.inner: list[str] = []  # each token's innermost open bracket: "(", "[", "{" or "" at file level
        self.templates, self.angles = _template_angles(toks, self.match)
        self.scopes: list[_Scope] = []  # the scope each token is in (innermost)
        self.opened: dict[int, _Scope] = {}
        self.skip: set[int] = set()  # tokens no mutant touches: static_assert(...), case labels, template arguments
        self._walk()

    # --- the walk: scopes and skipped regions ---------------------------------------------------------------------
    def _walk(self) -> None:
        stack: list[_Scope] = [_Scope("namespace")]
        brackets: list[str] = []
        toks = self.toks
        for i, tok in enumerate(toks):
            self.inner.append(brackets[-1] if brackets else "")
            if tok.kind == "punct" and i in self.match:
                brackets.append(tok.text)
            elif tok.kind == "punct" and i in self._openers and brackets:
                brackets.pop()
            if tok.text == "{" and tok.kind == "punct":
                scope = self._scope_of(i, stack)
                self.opened[i] = scope
                stack.append(scope)
            elif tok.text == "}" and tok.kind == "punct" and len(stack) > 1:
                stack.pop()
            self.scopes.append(stack[-1])
            if tok.text in ("static_assert", "alignas") and i + 1 < len(toks) and (i + 1) in self.match:
                self.skip.update(range(i, self.match[i + 1] + 1))
            elif tok.text == "case":
                j = i
                while j < len(toks) and toks[j].text not in (":", ";", "{"):
                    j += 1
                self.skip.update(range(i, j + 1))
            elif i in self.angles:
                self.skip.update(range(i, self.angles[i] + 1))  # template arguments are types and constants

    def _scope_of(self, i: int, stack: list[_Scope]) -> _Scope:  # noqa: C901 (one classification: each return is one kind of scope a `{` opens)
        """What the `{` at ``i`` opens, from the tokens before it."""
        toks = self.toks
        j = i - 1
        trailing: list[str] = []
        while j >= 0 and toks[j].text != ")" and (toks[j].text in _QUALIFIERS or toks[j].kind == "ident"
                                                  or toks[j].text in ("->", "::", "*", "<", ">", ",")):
            trailing.append(toks[j].text)
            j -= 1
            if len(trailing) > 24:
                break
        in_function = any(s.kind in ("function", "lambda") for s in stack)
        if j >= 0 and toks[j].text == "]" and not trailing:
            return _Scope("lambda", stack[-1].name)  # [captures] { ... }
        if j < 0 or toks[j].text != ")":
            back = self._statement_words(i)
            if "namespace" in back or ('extern' in back and not in_function):
                return _Scope("namespace", local=stack[-1].local or toks[i - 1].text == "namespace")
            if "enum" in back:
                return _Scope("enum")
            if back & {"class", "struct", "union"} and not in_function:
                return _Scope("class")
            return _Scope("other", stack[-1].name, stack[-1].value_init_return)
        explicit_return = "->" in trailing
        returns_ref = explicit_return and trailing[0] in ("&", "&&") or "auto" in trailing
        opener = self._opener(j)
        if opener is None or opener == 0:
            return _Scope("other", stack[-1].name, stack[-1].value_init_return)
        before = toks[opener - 1]
        if before.text == "]":
            return _Scope("lambda", stack[-1].name, explicit_return and not returns_ref)
        if before.text in _CONTROL:
            return _Scope("other", stack[-1].name, stack[-1].value_init_return)
        if before.kind != "ident" and before.text not in (">",) or in_function:
            return _Scope("other", stack[-1].name, stack[-1].value_init_return)
        name_at = opener - 1
        while True:  # a constructor's initializer list: `) : a(x), b{y} {` names the constructor, not `b`
            start = self._qualified_start(name_at)
            if start > 0 and toks[start - 1].text in (",", ":") and self._init_list_head(start - 1):
                previous = self._previous_close(start - 1)
                if previous is None:
                    break
                opened = self._opener(previous)
                if opened is None or opened == 0:
                    break
                name_at = opened - 1
                continue
            break
        start = self._qualified_start(name_at)
        name = "".join(t.text for t in toks[start:name_at + 1])
        head = [t.text for t in toks[self._declaration_start(start):start]]
        value_init = bool(head) and "void" not in head and not (head[-1] in ("&", "&&") or "auto" in head
                                                                   or "decltype" in head) or explicit_return
        if explicit_return:
            value_init = not returns_ref
        return _Scope("function", name, value_init, stack[-1].local or "static" in head)

    def _statement_words(self, i: int) -> set[str]:
        words: set[str] = set()
        j = i - 1
        while j >= 0 and self.toks[j].text not in (";", "{", "}"):
            words.add(self.toks[j].text)
            j -= 1
        return words

    def _opener(self, close: int) -> int | None:
        return self._openers.get(close)

    def _qualified_start(self, at: int) -> int:
        """The first token of a qualified name ending at ``at`` (`a::b::c`, `~X`, `operator==`)."""
        toks = self.toks
        j = at
        if toks[j].kind == "punct" and j > 0 and toks[j - 1].text == "operator":
            j -= 1
        while j >= 2 and toks[j - 1].text == "::" and toks[j - 2].kind == "ident":
            j -= 2
        if j >= 1 and toks[j - 1].text == "~":
            j -= 1
        return j

    def _init_list_head(self, at: int) -> bool:
        return self.toks[at].text == "," or (at > 0 and self.toks[at - 1].text == ")")

    def _previous_close(self, at: int) -> int | None:
        j = at - 1
        while j >= 0 and self.toks[j].text not in (")", "}", ";", "{"):
            j -= 1
        return j if j >= 0 and self.toks[j].text == ")" else None

    def _declaration_start(self, at: int) -> int:
        j = at - 1
        while j >= 0 and self.toks[j].text not in (";", "{", "}", ":") and not (
                self.toks[j].text == ">" and j in self.templates and self._is_template_head(j)):
            j -= 1
        return j + 1

    def _is_template_head(self, close: int) -> bool:
        opener = self._openers.get(close)
        return opener is not None and opener > 0 and self.toks[opener - 1].text == "template"

    # --- the splices ----------------------------------------------------------------------------------------------
    def splices(self) -> Iterator[tuple[_Splice, str]]:
        toks = self.toks
        for i, tok in enumerate(toks):
            scope = self.scopes[i]
            if i in self.skip or scope.kind not in ("function", "lambda", "other") or (
                    scope.kind == "other" and not scope.name):
                continue
            for splice in self._at(i, tok, scope):
                yield splice, scope.name

    def _at(self, i: int, tok: Token, scope: _Scope) -> Iterator[_Splice]:  # noqa: C901 (one dispatch on a token: each arm one operator family of docs/mutation-cpp.md)
        toks = self.toks
        text = tok.text
        if tok.kind == "punct":
            if text in _COMPOUND and not (text == "+=" and (self._stringy(i) or toks[i + 1].kind == "char")):
                yield _Splice(tok.start, tok.end, _COMPOUND[text], f"arith {text} -> {_COMPOUND[text]}")
            elif text in _ARITH and self._binary(i):
                if text == "*" and self._declarator(i):
                    return
                if text == "+" and self._stringy(i):
                    return
                yield _Splice(tok.start, tok.end, _ARITH[text], f"arith {text} -> {_ARITH[text]}")
            elif text in ("<<", ">>") and i not in self.templates and self._binary(i) and toks[i - 1].kind == "number":
                other = "<<" if text == ">>" else ">>"
                yield _Splice(tok.start, tok.end, other, f"arith {text} -> {other}")
            elif text in _COMPARE and i not in self.templates and self._binary(i):
                yield _Splice(tok.start, tok.end, _COMPARE[text], f"compare {text} -> {_COMPARE[text]}")
            elif text in _BOOLEAN and self._binary(i) and not (text == "&&" and self._declarator(i)):
                yield _Splice(tok.start, tok.end, _BOOLEAN[text], f"boolean {text} -> {_BOOLEAN[text]}")
            elif text == "!" and i + 1 < len(toks) and toks[i + 1].text not in ("=",):
                yield _Splice(tok.start, tok.end, "", "boolean drop !")
            elif text == "[" and self._binary(i) and toks[i + 1].text != "[" and (i - 1 < 0 or toks[i - 1].text != "["):
                yield from self._index(i)
        elif tok.kind == "ident":
            if text in ("true", "false"):
                yield _Splice(tok.start, tok.end, "false" if text == "true" else "true", "constant not")
            elif text in ("if", "while") and i + 1 < len(toks) and toks[i + 1].text == "(":
                yield from self._negated(i + 1)
            elif text == "return" and scope.value_init_return and i + 1 < len(toks) and toks[i + 1].text != ";":
                end = self._statement_end(i)
                if end is not None and not (toks[i + 1].text == "{" and toks[i + 2].text == "}"):
                    yield _Splice(tok.start, toks[end].end, "return {};", "return {}")
            elif text == "static_cast":
                yield from self._dropped_cast(i)
            elif text == "double" and self._local_declaration(i):
                yield _Splice(tok.start, tok.end, "float", "precision double -> float")
        elif tok.kind == "number":
            yield from self._constants(tok)
        if (tok.kind == "ident" or text in ("++", "--", "*")) and self._statement_start(i):
            yield from self._dropped(i)

    def _operand_end(self, j: int) -> bool:
        if j < 0:
            return False
        tok = self.toks[j]
        if tok.kind in ("number", "string", "char"):
            return True
        if tok.kind == "ident":
            return tok.text not in _NOT_OPERAND
        if tok.text == ")":  # not the condition of `if (p) *p = x;`
            opener = self._openers.get(j)
            return not (opener and self.toks[opener - 1].text in _CONTROL)
        return tok.text == "]" or (tok.text == ">" and j in self.templates and self.toks[j + 1].text == "(")

    def _binary(self, i: int) -> bool:
        return self._operand_end(i - 1) and i + 1 < len(self.toks) and (i - 1) not in self.skip

    def _declarator(self, i: int) -> bool:
        """`T* p`, `T&& r`, `const Foo* x = ...`: a declarator after a type name, not a multiplication or `&&`."""
        toks = self.toks
        before = toks[i - 1]
        if before.text in _TYPE_WORDS or (before.text in (">", ">>") and (i - 1) in self.templates):
            return True
        if before.kind != "ident":
            return False
        start = self._qualified_start(i - 1)
        head = toks[start - 1].text if start > 0 else ";"
        after = toks[i + 1] if i + 1 < len(toks) else None
        follows = toks[i + 2].text if i + 2 < len(toks) else ";"
        if after is None or after.kind != "ident":
            return after is not None and after.text in (")", ",", ">", "&", "*", "...")
        if head in (";", "{", "}", "const", "<", "static") and follows in ("=", ";", ",", "(", "{", "[", ":", ")"):
            return True
        if head in ("(", ",") and follows in (":", "=") and self.toks[i + 2].text != "==":
            return True
        return head == "(" and start >= 2 and toks[start - 2].text in ("for", "if", "while")

    def _stringy(self, i: int) -> bool:
        """The statement around token ``i`` builds a string (a literal or a std::string in it): `+` is concatenation."""
        toks = self.toks
        j, k = i, i
        while j > 0 and toks[j - 1].text not in (";", "{", "}"):
            j -= 1
        while k + 1 < len(toks) and toks[k + 1].text not in (";", "{", "}"):
            k += 1
        span = toks[j:k + 1]
        return any(t.kind == "string" for t in span) or bool(_STRINGY.search(" ".join(
            t.text for t in span).replace(" :: ", "::").replace(" ( )", "()")))

    def _index(self, i: int) -> Iterator[_Splice]:
        close = self.match.get(i)
        if close is None or close == i + 1:
            return
        inside = self.toks[i + 1:close]
        depth = 0
        for t in inside:
            depth += t.text in ("(", "[", "{")
            depth -= t.text in (")", "]", "}")
            if t.text == "," and depth == 0:
                return
        if len(inside) == 1 and inside[0].kind in ("string", "char"):
            return
        start, end = inside[0].start, inside[-1].end
        for sign in ("+", "-"):
            yield _Splice(start, end, f"({self.text[start:end]}) {sign} 1", f"index {sign}1")

    def _negated(self, open_: int) -> Iterator[_Splice]:
        close = self.match.get(open_)
        if close is None or close == open_ + 1:
            return
        if open_ >= 2 and self.toks[open_ - 1].text == "constexpr":
            return
        inside = self.toks[open_ + 1:close]
        depth = 0
        first = 0
        for n, t in enumerate(inside):
            depth += t.text in ("(", "[", "{")
            depth -= t.text in (")", "]", "}")
            if depth == 0 and t.text == ";":
                first = n + 1  # `if (init; condition)`: only the condition
            if depth == 0 and t.text == "=":
                return  # a declaration or an assignment in the condition
        cond = inside[first:]
        if not cond:
            return
        start, end = cond[0].start, cond[-1].end
        yield _Splice(start, end, f"!({self.text[start:end]})", "negate condition")

    def _statement_start(self, i: int) -> bool:
        """Token ``i`` begins a statement in a function body: after `;`, `{`, `}`, `else` or an `if (...)`-like
        condition, not inside parentheses."""
        toks = self.toks
        if self.scopes[i].kind not in ("function", "lambda", "other") or i == 0:
            return False
        before = toks[i - 1].text
        if before == "else":
            return True
        if before == ")":  # the body of `if (c) x = 1;` without braces
            opener = self._openers.get(i - 1)
            return opener is not None and opener != 0 and toks[opener - 1].text in _CONTROL and self.inner[i] != "("
        if before not in (";", "{", "}"):
            return False
        if before == "{" and self.opened.get(i - 1, _Scope("x")).kind not in ("function", "lambda", "other"):
            return False
        return self.inner[i] != "("  # a `for (...;...;...)` header holds no statement

    def _dropped(self, i: int) -> Iterator[_Splice]:
        """The expression statement (or `throw`) starting at ``i`` replaced by `;`."""
        toks = self.toks
        tok = toks[i]
        end = self._statement_end(i)
        if end is None:
            return
        if tok.text == "throw":
            yield _Splice(tok.start, toks[end].end, ";", "drop statement")
            return
        if (tok.kind != "ident" or tok.text in _NOT_OPERAND or tok.text in ("true", "false", "break", "continue")) and \
                tok.text not in ("++", "--", "*"):
            return
        j = i
        if tok.kind == "ident":
            j = self._qualified_end(i)
        following = toks[j + 1].text if j + 1 < len(toks) else ";"
        if tok.kind == "ident" and following not in ("(", ".", "->", "[", "=", "++", "--", "<<") and \
                following not in _COMPOUND:
            return
        if following == "(" and (j + 1) in self.match:
            close = self.match[j + 1]
            if close + 1 < len(toks) and toks[close + 1].text == "{":
                return  # a macro that takes a block
        yield _Splice(tok.start, toks[end].end, ";", "drop statement")

    def _dropped_cast(self, i: int) -> Iterator[_Splice]:
        """`static_cast<float>(e)` and `static_cast<double>(e)` -> `(e)`: the conversion left to the context (the
        precision family, docs/mutation-cpp.md). SyntaxError at the cast's line when it is not `<type>(...)`."""
        toks = self.toks
        close = self.angles.get(i + 1)
        if close is None or close + 1 >= len(toks) or toks[close + 1].text != "(" or (close + 1) not in self.match:
            tok = toks[i]
            raise SyntaxError("static_cast without a closed <type>(expression)",
                              ("", tok.line, tok.start - self.text.rfind("\n", 0, tok.start), None))
        target = " ".join(t.text for t in toks[i + 2:close])
        if target in ("float", "double"):
            yield _Splice(toks[i].start, toks[close + 1].start, "", f"precision drop static_cast<{target}>")

    def _local_declaration(self, i: int) -> bool:
        """The `double` at ``i`` is the type of a local variable: `double sum = 0.0;`, `const double x{...}`,
        `for (double t = 0; ...)`, never a parameter, a return type or a template argument."""
        toks = self.toks
        j = i - 1
        while j >= 0 and toks[j].text in ("const", "constexpr", "static", "volatile"):
            j -= 1
        before = toks[j].text if j >= 0 else ";"
        opens = before in (";", "{", "}") or (before == "(" and j > 0 and toks[j - 1].text == "for")
        named = i + 2 < len(toks) and toks[i + 1].kind == "ident" and toks[i + 1].text not in _NOT_OPERAND
        return opens and named and toks[i + 2].text in ("=", ";", "{", ",", "[")

    def _qualified_end(self, i: int) -> int:
        j = i
        while j + 2 < len(self.toks) and self.toks[j + 1].text == "::" and self.toks[j + 2].kind == "ident":
            j += 2
        return j

    def _statement_end(self, i: int) -> int | None:
        """The `;` ending the statement at ``i`` (same nesting), or None when a block or a comma comes first."""
        toks = self.toks
        j = i
        while j < len(toks):
            t = toks[j].text
            if t in ("(", "[") and j in self.match:
                j = self.match[j] + 1
                continue
            if t == "{" and j in self.match and j > i and toks[j - 1].text in ("]", ")", "mutable", "->") or (
                    t == "{" and j in self.match and toks[j - 1].kind == "ident" and j > i):
                j = self.match[j] + 1  # a lambda body or a braced initializer inside the statement
                continue
            if t == ";":
                return j
            if t in ("{", "}") or (t == "," and j > i):
                return None
            j += 1
        return None

    def _constants(self, tok: Token) -> Iterator[_Splice]:
        text = tok.text
        integer = _INT.fullmatch(text)
        if integer:
            digits, suffix = integer.groups()
            hexadecimal = digits[:2].lower() == "0x"
            value = int(digits.replace("'", ""), 16 if hexadecimal else 10)
            for name, new in (("+1", value + 1), ("-1", value - 1), ("0", 0)):
                if new == value or new < 0:
                    continue
                upper = any(c.isupper() for c in digits[2:])
                written = digits[:2] + format(new, "X" if upper else "x") if hexadecimal else str(new)
                yield _Splice(tok.start, tok.end, written + suffix, f"constant {name}")
            return
        decimal = _FLOAT.fullmatch(text)
        if decimal and not text.lower().startswith("0x") and text[0] != "0" or (decimal and text.startswith("0.")):
            number, suffix = decimal.groups()
            try:
                real = float(number.replace("'", ""))
            except ValueError:
                return
            for name, moved in (("+1", real + 1), ("-1", real - 1), ("0", 0.0)):
                if moved == real or moved < 0:
                    continue
                written = repr(moved)
                if "inf" in written or "nan" in written:
                    continue
                if "." not in written and "e" not in written:
                    written += ".0"
                yield _Splice(tok.start, tok.end, written + suffix, f"constant {name}")


def _matching(toks: list[Token]) -> dict[int, int]:
    """Each `(`, `[`, `{` at its index -> the index of its closing bracket (unbalanced ones are left out)."""
    pairs = {")": "(", "]": "[", "}": "{"}
    stack: list[int] = []
    match: dict[int, int] = {}
    for i, tok in enumerate(toks):
        if tok.kind != "punct":
            continue
        if tok.text in ("(", "[", "{"):
            stack.append(i)
        elif tok.text in pairs:
            while stack and toks[stack[-1]].text != pairs[tok.text]:
                stack.pop()  # an unbalanced opener (in a macro) is dropped
            if stack:
                match[stack.pop()] = i
    return match


_TEMPLATE_STOP = {";", "{", "}", "&&", "||", "==", "!=", "<=", ">=", "?", "=", "+=", "-=", "return"}
_AFTER_TEMPLATE = {"(", ")", "::", "{", "}", ">", ">>", ",", ";", "&", "&&", "*", "...", "[", "="}


def _template_angles(toks: list[Token], match: dict[int, int]) -> tuple[set[int], dict[int, int]]:
    """The indices of `<` and `>`/`>>` tokens that are template brackets (a `<` after `template` or after a name,
    closed by a `>` before anything only an expression has (`;`, `&&`, `==`, ...), followed by what may follow a
    type), and each outermost such `<` -> its closing token."""
    marked: set[int] = set()
    spans: dict[int, int] = {}
    for i, tok in enumerate(toks):
        if tok.text != "<" or i in marked or i == 0:
            continue
        before = toks[i - 1]
        if before.text == "operator" or (before.kind != "ident" and before.text != "template"):
            continue
        if before.text in _NOT_OPERAND and before.text != "template":
            continue
        found = _close_angle(toks, match, i)
        if found is None:
            continue
        closers, openers = found
        last = closers[-1]
        after = toks[last + 1] if last + 1 < len(toks) else None
        if before.text == "template" or after is None or after.text in _AFTER_TEMPLATE or after.kind == "ident":
            marked.update(closers)
            marked.update(openers)
            spans[i] = last
    return marked, spans


def _close_angle(toks: list[Token], match: dict[int, int], i: int) -> tuple[list[int], list[int]] | None:
    """The closing `>` of the `<` at ``i`` (and the nested ones): (closers, openers), or None when none is found."""
    depth = 1
    openers = [i]
    closers: list[int] = []
    j = i + 1
    while j < len(toks):
        t = toks[j]
        if t.text in ("(", "[") and j in match:
            j = match[j] + 1
            continue
        if t.text in _TEMPLATE_STOP or t.text in (")", "]") or t.kind in ("string",):
            return None
        if t.text == "<":
            if toks[j - 1].kind != "ident":
                return None
            depth += 1
            openers.append(j)
        elif t.text == ">":
            depth -= 1
            closers.append(j)
        elif t.text == ">>":
            depth -= 2
            closers.append(j)
        if depth <= 0:
            return (closers, openers) if depth == 0 else None
        j += 1
    return None
