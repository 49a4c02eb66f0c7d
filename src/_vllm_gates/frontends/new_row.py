"""`gates new-row NAME`: a new row that passes as written, in the one layout of docs/gating-a-port.md ("A row's
files"): its spec, roadmap entry, gate file, interface file, operation helper module, Python port and oracle.

Each file is a template of `templates/new_row/` rendered with the row's names. Nothing is overwritten: every path
is checked before the first is written, and the roadmap only gains the row's entry at its end.
"""
from __future__ import annotations

import keyword
import re
from dataclasses import dataclass
from pathlib import Path
from string import Template

import yaml

from _vllm_gates.base.errors import GatesError
from _vllm_gates.base.tomlsource import SECTION
from _vllm_gates.definitions.config import Config
from _vllm_gates.definitions.operations import FILE_NAME as OPERATIONS_FILE
from _vllm_gates.definitions.roadmap import ROW_ID

TEMPLATES = Path(__file__).resolve().parent / "templates" / "new_row"
IMPL_PACKAGE = "impl"  # the Python port's package, as docs/gating-a-port.md lays a row out
ORACLE_PACKAGE = "oracles"  # the oracles' package
MILESTONE_STATE = "GATING"  # the roadmap_entry template's: a stub is gated, not done
_ROWS_PATTERN = re.compile(r"^(?P<folder>[^*?\[\]]+)/\*/(?P<file>[^/*?\[\]]+\.yaml)$")
_SPECS_PATTERN = re.compile(r"^(?P<folder>[^*?\[\]]+)/\*\.md$")


class NewRowRefused(GatesError):
    """A row name or a project that `gates new-row` cannot write a row for; nothing was written."""


@dataclass(frozen=True)
class RowNames:
    """The names one row's files use, each derived from the row id."""

    row: str  # DEMO-ROW: the roadmap id
    slug: str  # demo-row: the spec file and the operation
    folder: str  # demo_row: the row folder and the Python modules (an identifier)

    @property
    def operation(self) -> str:
        return f"{self.slug}-blocks"

    @property
    def function(self) -> str:
        return f"{self.folder}_blocks"

    @property
    def requirement(self) -> str:
        return f"{self.row}-1.1"


def row_names(name: str) -> RowNames:
    """The names of row ``name``; NewRowRefused when it is no roadmap row id or its folder is no Python identifier."""
    if not ROW_ID.match(name):
        spelled = re.sub(r"[^A-Z0-9]+", "-", name.upper()).strip("-")
        hint = f" (did you mean {spelled!r}?)" if spelled and ROW_ID.match(spelled) and spelled != name else ""
        raise NewRowRefused(f"row name {name!r}: a row id is upper-case letters and digits in words joined by single "
                            f"dashes, starting with a letter ({ROW_ID.pattern}){hint}")
    folder = name.lower().replace("-", "_")
    if keyword.iskeyword(folder):
        raise NewRowRefused(f"row name {name!r}: its folder and modules would be named {folder!r}, a Python keyword, "
                            "which cannot be imported")
    return RowNames(name, name.lower(), folder)


@dataclass(frozen=True)
class Layout:
    """Where one row's files go in a project (paths relative to its root)."""

    names: RowNames
    rows_folder: str  # gates/rows
    gate_file_name: str  # gate.yaml
    spec_folder: str  # spec
    roadmap: str  # spec/roadmap.yaml
    marker: str  # the gate's marker: the project's default one

    @property
    def row_folder(self) -> str:
        return f"{self.rows_folder}/{self.names.folder}"

    @property
    def module_base(self) -> str:
        """The row folder as a Python package name (gates.rows.demo_row)."""
        return self.row_folder.replace("/", ".")

    def files(self) -> dict[str, str]:
        """The files to create, path -> template name, in the order docs/gating-a-port.md lists them."""
        names = self.names
        return {f"{self.spec_folder}/{names.slug}.md": "spec.md",
                f"{self.row_folder}/__init__.py": "row_init.py",
                f"{self.row_folder}/{OPERATIONS_FILE}": "operations.yaml",
                f"{self.row_folder}/{self.gate_file_name}": "gate.yaml",
                f"{self.row_folder}/{names.function}.py": "helper.py",
                f"{IMPL_PACKAGE}/{names.folder}.py": "impl.py",
                f"{ORACLE_PACKAGE}/{names.folder}.py": "oracle.py"}

    def values(self) -> dict[str, str]:
        """The placeholders the templates use."""
        names = self.names
        return {"row": names.row, "operation": names.operation, "function": names.function,
                "requirement": names.requirement, "marker": self.marker,
                "spec_path": f"{self.spec_folder}/{names.slug}.md",
                "gate_path": f"{self.row_folder}/{self.gate_file_name}",
                "impl_path": f"{IMPL_PACKAGE}/{names.folder}.py", "impl_module": f"{IMPL_PACKAGE}.{names.folder}",
                "oracle_path": f"{ORACLE_PACKAGE}/{names.folder}.py", "oracle_module": f"{ORACLE_PACKAGE}.{names.folder}",
                "helper_module": f".{names.function}"}


def layout(config: Config, names: RowNames) -> Layout:
    """Where the row goes: the row folder from the first `rows` pattern (DIR/*/FILE.yaml), the spec from the first
    `specs` pattern (DIR/*.md); NewRowRefused when the project's settings or packages do not fit that layout."""
    rows = next((m for m in map(_ROWS_PATTERN.match, config.rows) if m), None)
    if rows is None:
        raise NewRowRefused(f"[{SECTION}] rows = {list(config.rows)}: new-row needs a pattern DIR/*/FILE.yaml, one "
                            "folder per row (docs/gating-a-port.md, \"A row's files\")")
    specs = next((m for m in map(_SPECS_PATTERN.match, config.specs) if m), None)
    if specs is None:
        raise NewRowRefused(f"[{SECTION}] specs = {list(config.specs)}: new-row needs a pattern DIR/*.md")
    package_of_rows = rows.group("folder").split("/")[0]
    for package in (IMPL_PACKAGE, ORACLE_PACKAGE, package_of_rows):
        if package not in config.allowed_roots:
            raise NewRowRefused(f"[{SECTION}] allowed-roots = {list(config.allowed_roots)} lacks {package!r}: new-row "
                                f"writes the port under {IMPL_PACKAGE}/, the oracle under {ORACLE_PACKAGE}/ and the row "
                                f"under {rows.group('folder')}/ (docs/gating-a-port.md, \"A row's files\")")
    for package in (IMPL_PACKAGE, ORACLE_PACKAGE, rows.group("folder")):
        if not (config.root / package / "__init__.py").is_file():
            raise NewRowRefused(f"{package}/__init__.py not found under {config.root}: new-row writes into the "
                                f"package {package.replace('/', '.')}, which must exist")
    marker = config.default_marker or config.marker_names[0]
    return Layout(names, rows.group("folder"), rows.group("file"), specs.group("folder"), config.roadmap, marker)


def _taken(config: Config, plan: Layout) -> list[str]:
    """Why the row cannot be written as planned: each path that exists, a module or package of the same name, an
    operation of another row with the same name."""
    root, found = config.root, []
    for path in plan.files():
        if path.endswith("__init__.py"):
            path = path.rsplit("/", 1)[0]  # the row folder itself must be new
        if (root / path).exists() or (root / path).is_symlink():
            found.append(f"{path} already exists")
        elif path.endswith(".py") and (root / path[:-3]).exists():
            found.append(f"{path[:-3]}/ already exists (the module {path[:-3].replace('/', '.')})")
    for gate_file in config.gate_files():
        operations = gate_file.parent / OPERATIONS_FILE
        try:
            document = yaml.safe_load(operations.read_text(encoding="utf-8")) if operations.is_file() else None
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue  # that row's own load reports it
        declared = document.get("operations") if isinstance(document, dict) else None
        if isinstance(declared, dict) and plan.names.operation in declared:
            found.append(f"operation {plan.names.operation!r} is already declared in "
                         f"{operations.relative_to(root).as_posix()}")
    return list(dict.fromkeys(found))


def render(name: str, values: dict[str, str]) -> str:
    """Template ``name`` of templates/new_row with ``values``; KeyError for a placeholder without a value."""
    return Template((TEMPLATES / f"{name}.tmpl").read_text(encoding="utf-8")).substitute(values)


def roadmap_with_row(config: Config, plan: Layout) -> str:
    """The roadmap's text with the row's entry appended; NewRowRefused where that would change anything else (the
    entry is then to be added by hand, and it is quoted)."""
    path = config.root / plan.roadmap
    text = path.read_text(encoding="utf-8")
    entry = render("roadmap_entry.yaml", plan.values())
    before = yaml.safe_load(text) or {}
    rows = before.get("rows") if isinstance(before, dict) else None
    if isinstance(rows, dict) and plan.names.row in rows:
        raise NewRowRefused(f"row {plan.names.row} is already in {plan.roadmap}")
    joined = text + ("" if text.endswith("\n") or not text else "\n") + entry
    try:
        after = yaml.safe_load(joined)
    except yaml.YAMLError:
        after = None
    expected = {**(rows or {}), plan.names.row: yaml.safe_load(entry)[plan.names.row]}
    if not isinstance(after, dict) or after.get("rows") != expected or {k: v for k, v in after.items() if k != "rows"} != \
            {k: v for k, v in before.items() if k != "rows"}:
        raise NewRowRefused(f"{plan.roadmap}: the row's entry cannot be appended at its end (`rows:` is not its last "
                            f"key, or its rows are not indented by two spaces); nothing was written. The entry:\n{entry}")
    return joined


def new_row(config: Config, name: str, existing_rows: tuple[str, ...]) -> list[tuple[str, str]]:
    """Write row ``name``'s files; return each path written with what it holds. NewRowRefused, before anything is
    written, for a bad name, a row the roadmap has (``existing_rows``), any path that exists, a project not laid out
    as docs/gating-a-port.md says."""
    names = row_names(name)
    if name in existing_rows:
        raise NewRowRefused(f"row {name} is already in {config.roadmap}")
    plan = layout(config, names)
    taken = _taken(config, plan)
    if taken:
        raise NewRowRefused(f"row {name}: " + "; ".join(taken) + "; nothing was written (new-row overwrites nothing)")
    values = plan.values()
    texts = {path: render(template, values) for path, template in plan.files().items()}
    roadmap = roadmap_with_row(config, plan)
    written: list[Path] = []
    try:
        for path, text in texts.items():
            target = config.root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "x", encoding="utf-8") as handle:
                written.append(target)
                handle.write(text)
        (config.root / plan.roadmap).write_text(roadmap, encoding="utf-8")
    except OSError:
        for target in reversed(written):
            target.unlink(missing_ok=True)
        if (config.root / plan.row_folder).is_dir() and not any((config.root / plan.row_folder).iterdir()):
            (config.root / plan.row_folder).rmdir()
        raise
    what = {"spec.md": f"the requirement {names.requirement}", "row_init.py": "the row folder's package",
            "operations.yaml": f"the operation {names.operation}: input, output, errors, Python binding",
            "gate.yaml": f"the gate {names.operation}: one case, drawn examples, one known-bad",
            "helper.py": "the operation's helpers: strategy, the known-bad rounds_down",
            "impl.py": f"the Python port: {names.function}", "oracle.py": "the oracle: counted_blocks"}
    return [(path, what[template]) for path, template in plan.files().items()] + \
        [(plan.roadmap, f"+ row {name} ({MILESTONE_STATE}, milestone M1)")]
