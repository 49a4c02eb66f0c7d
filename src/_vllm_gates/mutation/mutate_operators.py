"""Mutants of one Python source text (docs/mutation.md, "The operators"): the standard operator families, applied as text splices at
`ast` positions so the rest of the file keeps its bytes; deterministic order (line, column, operator).

Families (docs/mutation.md): arithmetic, comparison and boolean operator swaps, constant +1/-1/0 and True/False,
negated condition, dropped statement, return None, index and slice bounds off by one, and precision: a dtype cast
dropped (`.to(dtype)`, `.float()`, ... with the receiver kept; a `dtype=` argument), a float dtype narrowed.
"""
from __future__ import annotations

import ast
import difflib
import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

_ARITH = {ast.Add: ("+", "-"), ast.Sub: ("-", "+"), ast.Mult: ("*", "//"), ast.Div: ("/", "*"),
          ast.FloorDiv: ("//", "*"), ast.Mod: ("%", "//"), ast.Pow: ("**", "*"), ast.LShift: ("<<", ">>"),
          ast.RShift: (">>", "<<"), ast.BitAnd: ("&", "|"), ast.BitOr: ("|", "&")}
_COMPARE = {ast.Lt: ("<", "<="), ast.LtE: ("<=", "<"), ast.Gt: (">", ">="), ast.GtE: (">=", ">"),
            ast.Eq: ("==", "!="), ast.NotEq: ("!=", "=="), ast.Is: ("is", "is not"), ast.IsNot: ("is not", "is"),
            ast.In: ("in", "not in"), ast.NotIn: ("not in", "in")}
_BOOL = {ast.And: ("and", "or"), ast.Or: ("or", "and")}
_DROPPABLE = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Raise, ast.Assert, ast.Delete)
_FAMILIES = {"arith": "arithmetic", "compare": "comparison", "boolean": "boolean", "constant": "constant",
             "negate": "condition", "drop statement": "statement", "return": "statement", "index": "index",
             "precision": "precision"}
FAMILIES = tuple(dict.fromkeys(_FAMILIES.values()))  # the names `gates mutate --family` takes
# Precision (docs/mutation.md, "The precision family"): which names are dtypes, which calls cast, what is narrower.
_DTYPE_MODULES = {"torch", "np", "numpy"}
_DTYPE_NAMES = {"float64", "double", "float32", "float", "single", "float16", "half", "bfloat16", "longdouble",
                "complex128", "cdouble", "complex64", "cfloat", "complex32", "chalf", "int8", "int16", "int32",
                "int64", "uint8", "uint16", "uint32", "uint64", "short", "int", "long", "bool", "bool_"}
_NARROWER: dict[str, dict[str, tuple[str, ...]]] = {"torch": {"float64": ("float32",), "double": ("float32",), "float32": ("float16", "bfloat16"),
                       "float": ("float16", "bfloat16"), "complex128": ("complex64",), "cdouble": ("complex64",)},
             "numpy": {"float64": ("float32",), "double": ("float32",), "float32": ("float16",),
                       "single": ("float16",), "longdouble": ("float64",), "complex128": ("complex64",)}}
_NARROWER["np"] = _NARROWER["numpy"]
_NARROWER_TEXT: dict[str, tuple[str, ...]] = {"float64": ("float32",), "float32": ("float16",), "complex128": ("complex64",)}  # "float32" names
_CAST_METHODS = {"float", "half", "bfloat16", "double"}  # `x.float()`: no argument, a cast of its own
_DTYPE_CASTS = {"to", "type", "astype"}  # `x.to(dtype)`: a cast when its argument is a dtype


@dataclass(frozen=True)
class Mutant:
    """One mutant of a file: where (1-based line), which operator, the mutated text and a fingerprint of the change."""

    file: str
    line: int
    operator: str
    index: int  # the n-th mutant with this file, line and operator (0-based)
    source: str  # the whole mutated file
    diff: str
    fingerprint: str  # sha256 of the file, the enclosing function and the changed lines' text, not their numbers

    def id(self, row: str) -> str:
        return f"{row}:{self.file}:{self.line}:{self.operator}:{self.index}"


@dataclass(frozen=True)
class _Splice:
    line: int
    start: tuple[int, int]  # (line, byte column) of the replaced text, 1-based line
    end: tuple[int, int]
    text: str
    operator: str


def compiles(file: str, text: str) -> bool:
    """Whether Python compiles ``text`` as the module ``file`` (a splice the grammar refuses is no mutant)."""
    try:
        compile(text, file, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def mutants(file: str, text: str, lines: set[int] | None = None,
            compiling: Callable[[str, str], bool] = compiles) -> list[Mutant]:
    """Every mutant of ``text`` (the file ``file``), optionally only on ``lines``; SyntaxError when it does not parse.
    ``compiling`` says whether a mutated text compiles (a memo of ``compiles`` may stand for it)."""
    tree = ast.parse(text, filename=file)
    raw = text.splitlines(keepends=True)
    splices = sorted(_splices(tree, raw), key=lambda s: (s.line, s.start, s.operator, s.end, s.text))
    functions = _enclosing(tree)
    statements = _top_level(tree)
    future = _future_imports(tree, raw)
    found: list[Mutant] = []
    counts: dict[tuple[int, str], int] = {}
    seen: set[str] = set()
    for splice in splices:
        if lines is not None and splice.line not in lines:
            continue
        mutated = _apply(raw, splice)
        if mutated == text or mutated in seen:
            continue
        # the one top-level statement the splice is in, after the file's __future__ imports: what can break
        if not compiling(file, future + _apply(raw, splice, statements[splice.start[0]])):
            continue  # a splice the grammar refuses is no mutant (each family is meant to keep the code compiling)
        seen.add(mutated)
        index = counts.get((splice.line, splice.operator), 0)
        counts[(splice.line, splice.operator)] = index + 1
        diff = "".join(difflib.unified_diff(raw, mutated.splitlines(keepends=True), f"a/{file}", f"b/{file}", n=1))
        changed = [row for row in diff.splitlines()[2:] if row[:1] in "+-"]
        where = functions.get(splice.line, "<module>")
        digest = hashlib.sha256("\n".join([file, where, splice.operator, *changed]).encode()).hexdigest()
        found.append(Mutant(file, splice.line, splice.operator, index, mutated, diff, digest))
    return found


def family(operator: str) -> str:
    """The family an operator's name belongs to (`arith + -> -` is arithmetic), as docs/mutation.md's tables group them."""
    return next((name for prefix, name in _FAMILIES.items() if operator.startswith(prefix)), operator.split(" ")[0])


def _enclosing(tree: ast.Module) -> dict[int, str]:
    """Each line inside a function or class, with the dotted name of the innermost one around it."""
    names: dict[int, str] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                for line in range(child.lineno, (child.end_lineno or child.lineno) + 1):
                    names[line] = name
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return names


def _future_imports(tree: ast.Module, raw: list[str]) -> str:
    """The file's `from __future__ import` lines, which change how its other statements compile."""
    return "".join("".join(raw[node.lineno - 1:node.end_lineno or node.lineno]) for node in tree.body
                   if isinstance(node, ast.ImportFrom) and node.module == "__future__")


def _top_level(tree: ast.Module) -> dict[int, tuple[int, int]]:
    """Each line of a top-level statement (its decorators included), with that statement's first and last line."""
    spans: dict[int, tuple[int, int]] = {}
    for node in tree.body:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        for line in range(first, (node.end_lineno or node.lineno) + 1):
            spans[line] = (first, node.end_lineno or node.lineno)
    return spans


def _apply(raw: list[str], splice: _Splice, within: tuple[int, int] | None = None) -> str:
    """The text with the splice made; ``within``: only the lines of that (first, last) span around it."""
    (l1, c1), (l2, c2) = splice.start, splice.end
    first, last = within or (1, len(raw))
    head = raw[l1 - 1].encode()[:c1].decode(errors="replace")
    tail = raw[l2 - 1].encode()[c2:].decode(errors="replace")
    return "".join(raw[first - 1: l1 - 1]) + head + splice.text + tail + "".join(raw[l2:last])


def _segment(raw: list[str], start: tuple[int, int], end: tuple[int, int]) -> str:
    (l1, c1), (l2, c2) = start, end
    if l1 == l2:
        return raw[l1 - 1].encode()[c1:c2].decode()
    parts = [raw[l1 - 1].encode()[c1:].decode()] + raw[l1:l2 - 1] + [raw[l2 - 1].encode()[:c2].decode()]
    return "".join(parts)


def _start(node: ast.AST) -> tuple[int, int]:
    return node.lineno, node.col_offset  # type: ignore[attr-defined]


def _end(node: ast.AST) -> tuple[int, int]:
    return node.end_lineno, node.end_col_offset  # type: ignore[attr-defined]


def _operator_in_gap(raw: list[str], left: ast.AST, right: ast.AST, old: str, new: str, name: str) -> _Splice | None:
    """The operator token between two operands (outside a comment) replaced by ``new``."""
    gap = _segment(raw, _end(left), _start(right))
    code = re.sub(r"#[^\n]*", lambda m: " " * len(m.group()), gap)  # comments blanked, offsets kept
    words = old.replace(" ", r"\s+")
    pattern = rf"(?<![\w]){words}(?![\w])" if old[0].isalpha() else rf"(?<![*/<>=!]){re.escape(old)}(?![*/<>=])"
    match = re.search(pattern, code)
    if match is None:
        return None
    text = gap[: match.start()] + new + gap[match.end():]
    return _Splice(_end(left)[0] + gap[: match.start()].count("\n"), _end(left), _start(right), text, name)


def _splices(tree: ast.Module, raw: list[str]) -> Iterator[_Splice]:
    skipped = _skipped_nodes(tree)
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        yield from _node_splices(node, raw)


def _skipped_nodes(tree: ast.Module) -> set[int]:
    """Nodes no mutant touches: annotations, docstrings (every bare string statement), `if TYPE_CHECKING:` /
    `if __name__ == ...` tests, and everything inside them."""
    roots: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            roots.extend(a.annotation for a in node.args.args + node.args.kwonlyargs + node.args.posonlyargs if a.annotation)
            roots.extend(x for x in (node.returns, node.args.vararg and node.args.vararg.annotation,
                                     node.args.kwarg and node.args.kwarg.annotation) if x)
            roots.extend(node.decorator_list)
        elif isinstance(node, ast.ClassDef):
            roots.extend(node.decorator_list)  # `@dataclass(frozen=True)`: how the class is built, as a function's
        elif isinstance(node, ast.AnnAssign):
            roots.append(node.annotation)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test) or (
                isinstance(node, ast.If) and "__name__" in ast.unparse(node.test)):
            roots.append(node)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            roots.append(node)  # a docstring, or an attribute's (a bare string after an assignment): no effect
    return {id(inner) for root in roots for inner in ast.walk(root)}


def _node_splices(node: ast.AST, raw: list[str]) -> Iterator[_Splice]:
    """The mutants of one node: an operator or constant it holds, then what is done to it as a statement or a call."""
    yield from _operator_splices(node, raw)
    yield from _constant_splices(node)
    yield from _statement_splices(node, raw)


def _operator_splices(node: ast.AST, raw: list[str]) -> Iterator[_Splice]:
    """An arithmetic, comparison or boolean operator swapped, or a `not` dropped."""
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
        old, new = _ARITH[type(node.op)]
        found = _operator_in_gap(raw, node.left, node.right, old, new, f"arith {old} -> {new}")
        if found:
            yield found
    elif isinstance(node, ast.AugAssign) and type(node.op) in _ARITH:
        old, new = _ARITH[type(node.op)]
        found = _operator_in_gap(raw, node.target, node.value, old + "=", new + "=", f"arith {old}= -> {new}=")
        if found:
            yield found
    elif isinstance(node, ast.Compare):
        left = node.left
        for op, right in zip(node.ops, node.comparators, strict=True):
            old, new = _COMPARE[type(op)]
            found = _operator_in_gap(raw, left, right, old, new, f"compare {old} -> {new}")
            if found:
                yield found
            left = right
    elif isinstance(node, ast.BoolOp):
        old, new = _BOOL[type(node.op)]
        for left, right in zip(node.values, node.values[1:], strict=False):
            found = _operator_in_gap(raw, left, right, old, new, f"boolean {old} -> {new}")
            if found:
                yield found
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield _Splice(node.lineno, _start(node), _end(node), _segment(raw, _start(node.operand), _end(node.operand)),
                      "boolean drop not")


def _constant_splices(node: ast.AST) -> Iterator[_Splice]:
    """A number moved by one or made 0, a boolean negated."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool) \
            and node.lineno == node.end_lineno:
        for name, value in (("+1", node.value + 1), ("-1", node.value - 1), ("0", 0)):
            if value != node.value:
                yield _Splice(node.lineno, _start(node), _end(node), repr(value), f"constant {name}")
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
        yield _Splice(node.lineno, _start(node), _end(node), repr(not node.value), "constant not")


def _statement_splices(node: ast.AST, raw: list[str]) -> Iterator[_Splice]:
    """A condition negated, a statement dropped, a return made `return None`, an index, cast or dtype moved."""
    if isinstance(node, (ast.If, ast.While, ast.IfExp)):
        test = node.test
        yield _Splice(test.lineno, _start(test), _end(test), f"not ({_segment(raw, _start(test), _end(test))})",
                      "negate condition")
    if isinstance(node, _DROPPABLE):
        yield _Splice(node.lineno, _start(node), _end(node), "pass", "drop statement")
    if isinstance(node, ast.Return) and node.value is not None and not (
            isinstance(node.value, ast.Constant) and node.value.value is None):
        yield _Splice(node.lineno, _start(node), _end(node), "return None", "return None")
    if isinstance(node, ast.Subscript):
        yield from _index_splices(node, raw)
    if isinstance(node, ast.Call):
        yield from _cast_splices(node, raw)
    if isinstance(node, ast.Attribute):
        yield from _narrowed(node, _NARROWER.get(_root_name(node), {}), node.attr)


def _index_splices(node: ast.Subscript, raw: list[str]) -> Iterator[_Splice]:
    """Off-by-one on an index or on a slice bound: `x[i]` -> `x[i + 1]`, `x[a:b]` -> `x[a:b - 1]` and so on."""
    index = node.slice
    bounds = [b for b in (index.lower, index.upper) if b is not None] if isinstance(index, ast.Slice) else \
        ([index] if not isinstance(index, (ast.Tuple, ast.Constant)) or isinstance(getattr(index, "value", None), int)
         else [])
    for bound in bounds:
        if isinstance(bound, ast.Constant) and not isinstance(bound.value, int):
            continue
        text = _segment(raw, _start(bound), _end(bound))
        if "\n" in text:
            continue
        for sign in ("+", "-"):
            yield _Splice(bound.lineno, _start(bound), _end(bound), f"({text}) {sign} 1", f"index {sign}1")


def _root_name(node: ast.Attribute) -> str:
    """The name at the root of `torch.float32` (`torch`), or "" for anything else than a name's attribute."""
    return node.value.id if isinstance(node.value, ast.Name) else ""


def _is_dtype(node: ast.expr) -> bool:
    """A dtype as written: `torch.float32` / `np.float64` (a dtype name of torch, np or numpy), `x.dtype`, a name
    `dtype` or `*_dtype`, or the text of a dtype name (`"float32"`). `.to(device)` and `.to(other)` are not."""
    if isinstance(node, ast.Attribute):
        return node.attr == "dtype" or (_root_name(node) in _DTYPE_MODULES and node.attr in _DTYPE_NAMES)
    if isinstance(node, ast.Name):
        return node.id == "dtype" or node.id.endswith("_dtype")
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in _DTYPE_NAMES


def _cast_splices(node: ast.Call, raw: list[str]) -> Iterator[_Splice]:
    """A cast dropped, the receiver kept (`x.float()` -> `x`; `x.to(torch.float32)` -> `x`, but not a `.to` that
    also moves a device: only its `dtype=` goes); a `dtype=` argument dropped; a dtype text narrowed."""
    func, dtype = node.func, next((k for k in node.keywords if k.arg == "dtype"), None)
    method = func.attr if isinstance(func, ast.Attribute) else ""
    device = any(k.arg == "device" for k in node.keywords)
    if method in _CAST_METHODS and not node.args and not node.keywords or method in _DTYPE_CASTS and not device and (
            (len(node.args) == 1 and _is_dtype(node.args[0])) or (not node.args and dtype is not None)):
        yield _dropped_call(node, raw, f"precision drop .{method}()")
    if dtype is not None and not (isinstance(dtype.value, ast.Constant) and dtype.value.value is None) and not (
            method in _DTYPE_CASTS and len(node.args) + len(node.keywords) == 1):
        yield _dropped_keyword(node, dtype)
    named = dtype.value if dtype is not None else node.args[0] if method in _DTYPE_CASTS and node.args else None
    if isinstance(named, ast.Constant) and isinstance(named.value, str):
        quote = _segment(raw, _start(named), _end(named))[:1]
        yield from _narrowed(named, _NARROWER_TEXT, named.value, quote)


def _dropped_call(node: ast.Call, raw: list[str], operator: str) -> _Splice:
    """`receiver.method(...)` replaced by the receiver as written (its parentheses included, so precedence holds)."""
    func = node.func
    assert isinstance(func, ast.Attribute)
    gap = _segment(raw, _end(func.value), _end(func))  # `)`s, spaces, comments, the dot, the method's name
    dot = re.sub(r"#[^\n]*", lambda m: " " * len(m.group()), gap).rfind(".")
    receiver = (_segment(raw, _start(node), _end(func.value)) + gap[:dot]).rstrip()
    return _Splice(_end(func)[0], _start(node), _end(node), receiver, operator)


def _dropped_keyword(node: ast.Call, keyword: ast.keyword) -> _Splice:
    """`f(a, dtype=t)` -> `f(a)`: the keyword with the comma before it (after it, when it comes first)."""
    arguments = sorted([*node.args, *node.keywords], key=_start)
    at = arguments.index(keyword)
    if at > 0:
        start, end = _end(arguments[at - 1]), _end(keyword)
    elif at + 1 < len(arguments):
        start, end = _start(keyword), _start(arguments[at + 1])
    else:
        start, end = _start(keyword), (_end(node)[0], _end(node)[1] - 1)  # up to the closing `)`
    return _Splice(keyword.lineno, start, end, "", "precision drop dtype=")


def _narrowed(node: ast.expr, narrower: dict[str, tuple[str, ...]], name: str, quote: str = "") -> Iterator[_Splice]:
    """The dtype name at the end of ``node`` (`torch.float32`'s `float32`, or a quoted `"float32"`) swapped for each
    narrower one."""
    line, column = _end(node)
    for new in narrower.get(name, ()):
        yield _Splice(line, (line, column - len(name) - len(quote)), (line, column), new + quote,
                      f"precision {name} -> {new}")
