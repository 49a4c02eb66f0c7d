"""The fast YAML path (values built straight from libyaml's events) gives exactly what the node-by-node path gives:
the same values of the same types, the same locations of every mapping, sequence, key and item, and the same
refusal where a document is refused. No timings here: speed targets live in ci/bench/bench_scale.py.
"""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _vllm_gates.base import yamlsource
from _vllm_gates.base.errors import DefinitionError
from _vllm_gates.base.yamlsource import YList, YMap, load_yaml

pytestmark = [pytest.mark.cpu, pytest.mark.skipif(yamlsource._CParser is None, reason="PyYAML is built without libyaml")]

REPO = Path(__file__).resolve().parents[2]
SETTINGS = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def node_by_node(text: str, shown: str = "f.yaml"):
    """What load_yaml returned before the fast path: compose (libyaml where it may), then convert node by node."""
    original = yamlsource._build_with_libyaml
    yamlsource._build_with_libyaml = lambda *args: yamlsource._FALLBACK
    try:
        return outcome(text, shown)
    finally:
        yamlsource._build_with_libyaml = original


def outcome(text: str, shown: str = "f.yaml"):
    try:
        return load_yaml(shown, text=text)
    except DefinitionError as error:
        return ("refused", str(error))
    except Exception as error:  # noqa: BLE001 - whatever escapes, it must be the same either way
        return ("raised", type(error).__name__, str(error))


def same(a, b, where: str = "top") -> None:
    assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, YMap):
        assert a.location == b.location, where
        assert list(a) == list(b) and [repr(k) for k in a] == [repr(k) for k in b], where
        assert a.key_locations == b.key_locations, where
        assert list(a.key_locations) == list(b.key_locations), where
        for key in a:
            same(a[key], b[key], f"{where}.{key!r}")
    elif isinstance(a, YList):
        assert a.location == b.location and a.item_locations == b.item_locations and len(a) == len(b), where
        for index, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{where}[{index}]")
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), where
    else:
        assert a == b and repr(a) == repr(b), f"{where}: {a!r} != {b!r}"


def check(text: str) -> None:
    same(outcome(text), node_by_node(text))


def project_yaml_files() -> list[Path]:
    found = [path for pattern in ("gates/**/*.yaml", "spec/*.yaml", "tests/example_project/**/*.yaml") for path in REPO.glob(pattern)]
    return sorted(found)[:200]


def test_every_yaml_file_of_the_repository_reads_the_same():
    files = project_yaml_files()
    assert files
    for path in files:
        text = path.read_text(encoding="utf-8")
        same(outcome(text, path.name), node_by_node(text, path.name))


@pytest.mark.parametrize("text", [
    "a: 1\n", "- 1\n- [2, 3]\n- {x: y}\n", "just a scalar\n", "", "# only a comment\n", "---\n", "--- 1\n--- 2\n",
    "a: 1\na: 2\n", "1: x\ntrue: y\n", "1: x\n1.0: y\n", ".nan: 1\n.nan: 2\n", "a: .nan\nb: [.inf, -.inf, .NaN]\n",
    "<<: {a: 1}\n", "a: &x 1\nb: *x\n", "a: *nope\n", "? [1, 2]\n: x\n", "? {a: 1}\n: x\n", "a: !!int abc\n",
    "d: 2020-13-45\n", "d: 2020-01-02\nt: 2001-12-14t21:59:43.10-05:00\n", "a: =\n", "a: ~\nb: null\nc: Null\nd:\n",
    "a: 0x1F\nb: 0o17\nc: 1_000\nd: +12\ne: 0b101\nf: 1:20\n", "a: yes\nb: No\nc: on\nd: 'true'\ne: \"1\"\n",
    "a: [1, 2\n", "a: b: c\n", "key: |\n  text\n  more\nb: >-\n  folded\n", "a:\n  - b:\n      - c: [d, {e: f}]\n",
    "'q': 1\n\"r\": 2\n", "a: 'it''s'\nb: \"\\u00e9\\n\"\n", "[a, b]: 1\n", "{}\n", "[]\n", "a: {}\nb: []\n",
    "x: 1\n...\n", "%YAML 1.1\n---\na: 1\n", "a: b\n\tc: d\n", "a: |#\n  x\n", "a: \u00e9\u00e8\n", "\ufeffa: 1\n",
    "- - - - x\n", "a: [[[[[]]]]]\n", "a: {b: {c: {d: {}}}}\n", "- ? a\n  : b\n", "a: 1 # c\n# d\nb: 2\n",
    "- \n- ''\n- ' '\n", "a: -1.5e+3\nb: 1e3\nc: .5\n", "a: 12345678901234567890123\n",
])
def test_named_documents_read_the_same(text):
    check(text)


def test_nesting_at_and_past_the_limit_reads_the_same():
    depth = yamlsource.MAX_DEPTH
    for levels in (depth - 1, depth, depth + 1, depth + 2):
        check("a: " + "[" * levels + "]" * levels + "\n")
        check("x" + "".join(f"\n{'  ' * i}k{i}:" for i in range(levels)) + " v\n")


def test_the_node_limit_is_refused_alike(monkeypatch):
    monkeypatch.setattr(yamlsource, "MAX_NODES", 50)
    for count in (20, 24, 25, 26, 40):
        check("".join(f"k{i}: {i}\n" for i in range(count)))
    check("a: &x [1, 2, 3]\n" + "".join(f"k{i}: *x\n" for i in range(30)))


scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**20), st.floats(allow_nan=True),
                    st.text(max_size=12), st.sampled_from(["1", "true", "~", "null", "0x1f", "1e3", ".nan", "2020-01-02",
                                                            "<<", "=", "a: b", "- x", "#", "'", '"', "|", "yes", "0o7"]))
keys = st.one_of(st.text(max_size=8), st.integers(-5, 5), st.booleans(), st.none(),
                 st.sampled_from(["1", "1.0", "true", "<<", "input", "expect"]))
documents = st.recursive(scalars, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(keys, inner, max_size=5),
                         max_leaves=30)


@SETTINGS
@given(documents, st.sampled_from([None, True, False]), st.integers(1, 6))
def test_dumped_documents_read_the_same(value, flow, indent):
    check(yaml.safe_dump(value, default_flow_style=flow, indent=indent + 1, allow_unicode=True, sort_keys=False))


@SETTINGS
@given(documents, st.integers(0, 400), st.text(alphabet="{}[]:,-?&*!|>'\" \n#xk1.", max_size=6))
def test_edited_documents_read_the_same(value, at, inserted):
    text = yaml.safe_dump(value, default_flow_style=False, allow_unicode=True, sort_keys=False)
    at = min(at, len(text))
    check(text[:at] + inserted + text[at:])


def test_the_example_gate_file_reads_the_same_line_by_line_edited():
    text = (REPO / "tests/example_project/gates/rows/example/gate.yaml").read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    check(text)
    for index in range(len(lines)):  # each line dropped, and each line doubled (duplicate keys)
        check("".join(lines[:index] + lines[index + 1:]))
        check("".join(lines[:index + 1] + lines[index:]))
