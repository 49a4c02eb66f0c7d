"""A name that is not a string where the protocol wants one (an op, a problem's key) is a protocol error with its
place, not a TypeError that ends the worker or the judge's collection (docs/worker-protocol.md §5.4; found by mypy)."""
from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from _vllm_gates.base.errors import Location
from _vllm_gates.definitions.model import TargetRef
from _vllm_gates.frontends.plugin import _check_problems
from _vllm_gates.wire.channel import PROTOCOL_VERSION, receive, send

pytestmark = pytest.mark.cpu


def test_the_python_worker_answers_an_op_that_is_a_list_as_unknown(tmp_path):
    judge, worker = socket.socketpair()
    process = subprocess.Popen([sys.executable, "-m", "_vllm_gates.workers.worker_main", "--fd", str(worker.fileno())],
                               pass_fds=(worker.fileno(),), cwd=tmp_path)
    worker.close()
    try:
        send(judge, {"op": "hello", "version": PROTOCOL_VERSION, "root": str(tmp_path), "path": [],
                     "allowed_roots": ["pkg"], "role": "impl"})
        assert receive(judge, 60)["op"] == "ready"
        send(judge, {"op": ["call"], "id": 7})
        assert receive(judge, 60) == {"id": 7, "error": {"kind": "protocol", "message": "unknown op ['call']",
                                                         "which": "target"}}
        send(judge, {"op": "bye"})
        assert process.wait(60) == 0
    finally:
        if process.poll() is None:
            process.kill()
        judge.close()


def test_a_check_reply_whose_problem_key_is_a_list_is_the_worker_breaking_the_protocol():
    ref = TargetRef("pkg.mod:fn", Location("gate.yaml", 3, 9))
    reply = {"result": {"problems": [{"key": ["gate g.impl"], "message": "no such attribute"}]}}
    problems = _check_problems({"impl": [("gate g.impl", ref, None)]}, {"impl": reply})
    assert list(problems) == ["g"]
    [problem] = problems["g"]
    assert problem.location == ref.location and problem.key == "gate g.impl"
    assert problem.message.startswith("the impl worker broke the protocol: {'key': ['gate g.impl']"), problem.message
