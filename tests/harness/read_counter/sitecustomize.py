"""Counts the engine's opens of some files: one line per open, `pid process file`, appended to a log
(test_reads_once.py, issue 27 item 2). In every Python process started with this folder on PYTHONPATH and
VLLM_GATES_COUNT_FILES (os.pathsep between the files) and VLLM_GATES_COUNT_LOG set; or in this one, by `counting`.

An open is the engine's when the nearest frame of `_vllm_gates` or `_pytest` that leads to it is the engine's
(pytest reading pyproject.toml for its own configuration is not). Every way to open a file by name is watched:
os.open (the engine's definition reader), io.open / builtins.open and so pathlib's read_text and read_bytes.
"""
from __future__ import annotations

import builtins
import io
import os
import sys

_os_open, _io_open = os.open, io.open
_OWNERS = (os.sep + "_vllm_gates" + os.sep, os.sep + "_pytest" + os.sep)
_watch: dict[str, object] = {"files": set(), "names": set(), "log": ""}


def _by_engine() -> bool:
    frame = sys._getframe(3)
    while frame is not None:
        name = frame.f_code.co_filename
        if _OWNERS[0] in name:
            return True
        if _OWNERS[1] in name:
            return False
        frame = frame.f_back
    return False


def _note(path: object) -> None:
    try:
        name = os.fspath(path)  # type: ignore[arg-type]
    except TypeError:
        return  # a file descriptor
    if isinstance(name, bytes):
        name = os.fsdecode(name)
    if os.path.basename(name) not in _watch["names"] or os.path.realpath(name) not in _watch["files"] or not _by_engine():  # type: ignore[operator]
        return
    process = os.environ.get("PYTEST_XDIST_WORKER", "main")
    fd = _os_open(str(_watch["log"]), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{os.getpid()} {process} {os.path.basename(name)}\n".encode())
    finally:
        os.close(fd)


def _counting_os_open(path, *args, **kwargs):  # type: ignore[no-untyped-def]
    _note(path)
    return _os_open(path, *args, **kwargs)


def _counting_open(file, *args, **kwargs):  # type: ignore[no-untyped-def]
    _note(file)
    return _io_open(file, *args, **kwargs)


def start(files: list[str], log: str) -> None:
    """Count the engine's opens of ``files`` into ``log`` from now on."""
    _watch.update(files={os.path.realpath(p) for p in files}, names={os.path.basename(p) for p in files}, log=log)
    os.open = _counting_os_open
    io.open = builtins.open = _counting_open


def stop() -> None:
    """Stop counting: the usual open functions again."""
    os.open = _os_open
    io.open = builtins.open = _io_open


if os.environ.get("VLLM_GATES_COUNT_FILES") and os.environ.get("VLLM_GATES_COUNT_LOG"):
    start([p for p in os.environ["VLLM_GATES_COUNT_FILES"].split(os.pathsep) if p], os.environ["VLLM_GATES_COUNT_LOG"])
