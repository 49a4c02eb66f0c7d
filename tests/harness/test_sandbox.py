"""The implementation cannot read the answers (docs/worker-protocol.md §2.2): its workers start in a scratch folder of
their own and, where the kernel has Landlock, open nothing of the project but what it declares (`reads`) and write
nothing in it. A worker that tries is refused by the kernel, and the failure is its own: a FAIL of that case.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from _vllm_gates.workers import sandbox
from _vllm_gates.workers.landlock import Rules, abi_version, restrict

pytestmark = pytest.mark.cpu

needs_landlock = pytest.mark.skipif(abi_version() < 1, reason="this kernel has no Landlock (Linux 5.13 or later)")
IMPL = "example_row/impl.py"
RETURN = "    return 2 * block_size * heads * head_size * dtype_bytes\n"
WORKER = Path(__file__).with_name("external_worker.py")


def _impl_first(example, lines: str) -> None:
    """Run ``lines`` (indented, with ROOT the project root) at the top of every call of the example's impl."""
    text = example.read(IMPL).replace('def page_bytes(block_size: int, heads: int, head_size: int, dtype_bytes: int) -> int:\n',
                                      'def page_bytes(block_size: int, heads: int, head_size: int, dtype_bytes: int) -> int:\n'
                                      '    import os\n    from pathlib import Path\n'
                                      '    ROOT = Path(__file__).resolve().parents[1]\n' + lines)
    example.write(IMPL, text)


def _declare_reads(example, name: str, reads: list[str]) -> None:
    table = f"[tool.vllm-gates.implementations.{name}]\nreads = {json.dumps(reads)}\n\n"
    example.write("pyproject.toml", example.read("pyproject.toml").replace("[tool.pytest.ini_options]", table + "[tool.pytest.ini_options]"))


@needs_landlock
def test_landlock_rules_open_only_what_they_name(tmp_path):
    """landlock.restrict in a child: a named file reads, a file beside it in the hidden tree does not, its folder
    lists, nothing in it is written; the scratch folder is writable and the system stays readable."""
    project, scratch = tmp_path / "project", tmp_path / "scratch"
    (project / "impl").mkdir(parents=True)
    (project / "answers").mkdir()
    (project / "impl" / "code.py").write_text("code")
    (project / "answers" / "expect.txt").write_text("42")
    scratch.mkdir()
    read, written = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        os.close(read)
        seen = {}
        try:
            restrict(Rules(read=(str(project / "impl"),), list_only=(str(project),), write=(str(scratch),), hidden=str(project)))
            for label, attempt in [("impl", lambda: (project / "impl" / "code.py").read_text()),
                                   ("answers", lambda: (project / "answers" / "expect.txt").read_text()),
                                   ("listing", lambda: sorted(os.listdir(project / "answers"))),
                                   ("write-project", lambda: (project / "impl" / "new.py").write_text("x")),
                                   ("write-scratch", lambda: (scratch / "note").write_text("x")),
                                   ("system", lambda: Path(sys.executable).read_bytes()[:4].hex())]:
                try:
                    seen[label] = attempt()
                except OSError as error:
                    seen[label] = f"errno {error.errno}"
        except BaseException as error:
            seen["error"] = repr(error)
        os.write(written, json.dumps(seen).encode())
        os._exit(0)
    os.close(written)
    with os.fdopen(read) as pipe:
        seen = json.loads(pipe.read())
    os.waitpid(pid, 0)
    assert seen["impl"] == "code" and seen["listing"] == ["expect.txt"], seen
    assert seen["answers"] == "errno 13" and seen["write-project"] == "errno 13", seen
    assert seen["write-scratch"] == 1 and seen["system"] == "7f454c46", seen  # an ELF interpreter
    assert not (project / "impl" / "new.py").exists()


def test_what_lies_outside_a_tree_leaves_out_every_way_back_into_it(tmp_path):
    """The entries beside the way down to the project; a symlink into it, or to a folder holding it (pytest's
    `pytest-current`), would open it whole, so it is left out."""
    from _vllm_gates.workers.landlock import outside

    project = tmp_path / "a" / "b" / "project"
    project.mkdir(parents=True)
    (tmp_path / "a" / "b" / "other").mkdir()
    (tmp_path / "a" / "c.txt").write_text("c")
    (tmp_path / "a" / "up").symlink_to(tmp_path / "a")
    (tmp_path / "a" / "in").symlink_to(project / "gates", target_is_directory=True)
    (tmp_path / "a" / "out").symlink_to("/etc")
    found = {Path(path).relative_to(tmp_path).as_posix() for path in outside(str(project), str(tmp_path))}
    assert found == {"a/b/other", "a/c.txt", "a/out"}, found
    assert outside(str(project), str(project)) == [] and outside(str(tmp_path), str(project)) == [str(project)]


@needs_landlock
@pytest.mark.parametrize("path", ["gates/rows/example/gate.yaml", "gates/rows/example/fixtures/expect.json", "example_row/oracle.py"],
                         ids=["gate-file", "fixture", "oracle"])
def test_an_impl_that_opens_the_answers_is_refused_by_the_kernel_and_fails(example, path):
    """Whatever it would have done with them, the impl that opens a gate file, a fixture or an oracle's source gets
    EACCES: its case FAILs with the error it raised, never the gate's ERROR."""
    example.write("gates/rows/example/fixtures/expect.json", '{"fp16-page": 32}')
    _declare_reads(example, "python", ["example_row/__init__.py", "example_row/impl.py", "gates/**/*.py"])
    _impl_first(example, f"    (ROOT / {path!r}).read_bytes()\n")
    result, report = example.run_json("--profile", "ci")
    assert result.code == 1, result.text
    assert example.gate(report)["verdict"] == "FAIL"
    assert f"raised PermissionError: [Errno 13] Permission denied: '{example.root.resolve() / path}'" in result.text
    assert "gate error" not in result.text and "sandbox:" not in result.text


@needs_landlock
def test_an_impl_cannot_write_into_the_project(example):
    """Editing the oracle (or anything else in the project) is refused; the oracle is left as it was."""
    before = example.read("example_row/oracle.py")
    _impl_first(example, "    with open(ROOT / 'example_row' / 'oracle.py', 'a') as oracle:\n        oracle.write('# edited')\n")
    result, report = example.run_json("--profile", "ci")
    assert result.code == 1, result.text
    assert example.gate(report)["verdict"] == "FAIL" and "PermissionError: [Errno 13]" in result.text
    assert example.read("example_row/oracle.py") == before


def test_an_impl_runs_in_a_scratch_folder_of_its_own_removed_after(example, tmp_path):
    """Its working directory and TMPDIR are a folder outside the project, writable, gone once the run ends; the
    oracle's worker still runs in the project root. (Without Landlock too: only the reading is the kernel's.)"""
    seen = tmp_path / "cwds"
    _impl_first(example, f"    import tempfile\n    Path('scratch-note').write_text('x')\n"
                         f"    Path(tempfile.mkstemp()[1]).write_text('x')\n"
                         f"    with open({str(seen)!r}, 'a') as out:\n        out.write(os.getcwd() + '\\t' + tempfile.gettempdir() + '\\n')\n")
    example.edit("    return one + one\n", "    import os\n    assert os.getcwd() == os.path.dirname(os.path.dirname(__file__))\n"
                                         "    return one + one\n", "example_row/oracle.py")
    result = example.gates("run", "--profile", "ci")
    assert result.code == 0, result.text
    places = {tuple(line.split("\t")) for line in seen.read_text().splitlines()}
    assert places and all(cwd == tmp for cwd, tmp in places), places
    for cwd, _ in places:
        assert not Path(cwd).resolve().is_relative_to(example.root.resolve()) and not Path(cwd).exists(), cwd
    assert not (example.root / "scratch-note").exists()


@needs_landlock
def test_an_external_worker_that_opens_the_gate_file_is_refused_and_that_case_fails(example):
    """The external command runs restricted too (a stand-alone worker written without the engine): its attempt ends
    it, and the judge reports the crash as that case's FAIL with its last output."""
    from tests.harness.test_implementations import _external

    _external(example, "peek")
    result, report = example.run_json("--impl", "fake", "--profile", "ci")
    assert result.code == 1, result.text
    assert example.gate(report)["verdict"] == "FAIL" and "impl crashed" in result.text
    assert "PermissionError: [Errno 13] Permission denied" in result.text and "gate error" not in result.text


def test_an_external_worker_starts_outside_the_project(example, tmp_path, monkeypatch):
    """Its working directory is its scratch folder, not the project root hello names (it may read by that name)."""
    from tests.harness.test_implementations import _external

    log = tmp_path / "where.log"
    monkeypatch.setenv("EXTERNAL_WORKER_LOG", str(log))
    _external(example, "correct")
    assert example.gates("run", "--impl", "fake", "--profile", "ci").code == 0
    cwds = [json.loads(line)["cwd"] for line in log.read_text().splitlines() if '"cwd"' in line]
    assert cwds and all(not Path(cwd).resolve().is_relative_to(example.root.resolve()) for cwd in cwds), cwds


def test_sandbox_false_turns_it_off_and_the_run_says_so_once(example):
    """The option is never silent: one line under the table names the key and its line; the impl reads freely."""
    example.write("pyproject.toml", example.read("pyproject.toml").replace("[tool.vllm-gates]\n", "[tool.vllm-gates]\nsandbox = false\n"))
    _impl_first(example, "    (ROOT / 'gates/rows/example/gate.yaml').read_text()\n")
    result = example.gates("run", "--profile", "ci")
    assert result.code == 0, result.text
    line = example.line("sandbox = false", relative="pyproject.toml")
    assert result.text.count("sandbox: off") == 1
    assert f"sandbox: off (`sandbox = false` in [tool.vllm-gates], pyproject.toml:{line}:1)" in result.text


def test_a_kernel_without_landlock_is_told_once_and_the_run_goes_on(example, monkeypatch):
    monkeypatch.setattr(sandbox, "abi_version", lambda: 0)
    result, report = example.run_json("--profile", "ci")
    assert result.code == 0, result.text
    assert result.text.count("sandbox: none: this kernel has no Landlock") == 1
    assert report["meta"]["sandbox"].startswith("sandbox: none")


@pytest.mark.parametrize("body, message", [
    ('reads = ["../elsewhere"]', "implementations.python.reads: entry '../elsewhere' has a '..' segment"),
    ('reads = ["/etc/passwd"]', "implementations.python.reads: entry '/etc/passwd' is an absolute path"),
    ('reads = ["etc/passwd"]', "implementations.python.reads: entry 'etc/passwd': its folder 'etc/passwd' leaves the project "
                               "root through a symlink (it resolves to '/etc/passwd')"),
    ('reads = "impl"', "implementations.python.reads: expected a list of paths or glob patterns"),
])
def test_a_reads_entry_outside_the_project_is_refused_at_its_line(example, body, message):
    (example.root / "etc").symlink_to("/etc")
    example.write("pyproject.toml", example.read("pyproject.toml").replace(
        "[tool.pytest.ini_options]", f"[tool.vllm-gates.implementations.python]\n{body}\n\n[tool.pytest.ini_options]"))
    result = example.gates("list")
    assert result.code == 3, result.text
    line = example.line(body, relative="pyproject.toml")
    assert f"pyproject.toml:{line}:" in result.text and message in result.text, result.text


def test_a_sandbox_value_that_is_not_a_flag_is_refused(example):
    example.write("pyproject.toml", example.read("pyproject.toml").replace("[tool.vllm-gates]\n", "[tool.vllm-gates]\nsandbox = \"no\"\n"))
    result = example.gates("list")
    assert result.code == 3 and "pyproject.toml:2:" in result.text and "sandbox: expected true or false, got 'no'" in result.text


def test_what_the_python_port_may_read_by_default_is_its_allowed_roots_python_files(example):
    """Undeclared, the python port reads the Python files under the allowed roots; declared, what it names: never
    a gate file (yaml) or a fixture. The interpreter and the engine's packages come along when inside the project."""
    from _vllm_gates.definitions.config import load_config

    config = load_config(example.root)
    rules = sandbox.rules(config, config.implementation("python"))
    root = example.root.resolve()
    assert str(root / "example_row" / "impl.py") in rules.read and str(root / "gates/rows/example/known_bad.py") in rules.read
    assert not any(path.endswith((".yaml", ".md")) for path in rules.read), rules.read
    assert rules.list_only == (str(root),) and rules.hidden == str(root) and "/dev" in rules.write


@needs_landlock
def test_an_impl_importing_a_project_package_its_reads_leave_out_is_a_definition_error_naming_reads(example):
    """The impl's own module imports a helper package that is no allowed root: its import is refused, the gate is
    a definition ERROR at its impl line that names the file and `reads`; declared there, the gate passes."""
    example.write("page_geometry/__init__.py", "KV = 2\n")
    example.edit('"""\n', '"""\nfrom page_geometry import KV\n', IMPL)
    result, report = example.run_json("--profile", "ci")
    assert result.code == 3, result.text
    assert example.gate(report)["verdict"] == "ERROR"
    assert (f"definition error: gates/rows/example/gate.yaml:{example.line('impl: example_row.impl:page_bytes')}:5: gate "
            "page-bytes.impl: cannot import module 'example_row.impl' for target 'example_row.impl:page_bytes': "
            f"PermissionError: [Errno 13] Permission denied: '{example.root.resolve() / 'page_geometry/__init__.py'}' "
            "(the sandbox: implementation 'python' may read of the project only what `reads` of "
            "[tool.vllm-gates.implementations.python] names, not page_geometry/__init__.py, and write nowhere in it)"
            ) in result.text, result.text
    _declare_reads(example, "python", ["example_row", "page_geometry", "gates/**/*.py"])
    result, report = example.run_json("--profile", "ci")
    assert result.code == 0 and example.gate(report)["verdict"] == "PASS", result.text


def test_a_refusal_is_explained_only_for_a_file_of_the_project_the_rules_leave_out(tmp_path):
    """A PermissionError on a file outside the project, on one `reads` grants, or with no rules in force (no
    Landlock, `sandbox = false`) is left as the worker worded it."""
    granted = tmp_path / "impl"
    rules = sandbox.Sandbox(Rules(read=(str(granted),), hidden=str(tmp_path)))
    denied = lambda path: f"PermissionError: [Errno 13] Permission denied: '{path}'"  # noqa: E731
    assert "not secret.txt, and write nowhere" in sandbox.explain_refusal(rules, "python", denied(tmp_path / "secret.txt"))
    for message in (denied("/etc/shadow"), denied(granted / "code.py"), "ImportError: no module named x"):
        assert sandbox.explain_refusal(rules, "python", message) == message
    assert sandbox.explain_refusal(sandbox.Sandbox(None, "sandbox: off"), "python", denied(tmp_path / "x")) == denied(tmp_path / "x")


def test_a_command_naming_a_script_of_the_project_runs_from_the_scratch_folder(example):
    """`command` is written relative to the root: the script it names is found (made absolute) and readable to the
    confined worker, though `reads` (its `sources` by default, none here) does not name it."""
    from tests.harness.test_implementations import _external

    _external(example, "correct")
    example.write("port_worker.py", WORKER.read_text(encoding="utf-8"))
    text = example.read("pyproject.toml")
    assert text.count(json.dumps(str(WORKER))) == 1
    example.write("pyproject.toml", text.replace(json.dumps(str(WORKER)), json.dumps("port_worker.py")))
    result, report = example.run_json("--impl", "fake", "--profile", "ci")
    assert result.code == 0, result.text
    assert example.gate(report)["verdict"] == "PASS"
