"""Progress on long work (docs/mutation.md, "Progress"): one line per row redrawn in place on a terminal, plain lines
now and then elsewhere; `gates mutate` and `gates audit` show it."""
from __future__ import annotations

import functools
import io
import json

import pytest

from _vllm_gates.frontends.row_progress import RowProgress
from _vllm_gates.mutation import mutate
from _vllm_gates.results.progress import PLAIN_EVERY, Progress

from .conftest import Example
from .test_mutate_review import _recording

pytestmark = pytest.mark.cpu


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_terminal_line_is_redrawn_in_place_with_rate_and_eta() -> None:
    stream, clock = io.StringIO(), Clock()
    progress = Progress("ROW", 10, stream=stream, live=True, clock=clock)
    clock.now += 4.0
    progress.update(2, {"killed": 1, "survived": 1})
    clock.now += 0.05  # sooner than a redraw: nothing
    progress.update(3, {"killed": 2, "survived": 1})
    assert stream.getvalue() == "\rROW: 2/10 judged, killed 1, survived 1, 0.50/s, ETA 16s"
    clock.now += 96.0
    progress.update(10, {"killed": 9, "survived": 1})  # the last step is always drawn
    assert stream.getvalue().endswith("\rROW: 10/10 judged, killed 9, survived 1, 0.10/s, ETA 0s")
    progress.close()
    assert stream.getvalue().endswith("\r" + " " * len("ROW: 10/10 judged, killed 9, survived 1, 0.10/s, ETA 0s") + "\r")
    assert "\n" not in stream.getvalue()


def test_plain_output_gets_a_line_now_and_then_and_never_a_carriage_return() -> None:
    stream, clock = io.StringIO(), Clock()
    progress = Progress("ROW", 200, stream=stream, live=False, clock=clock)
    clock.now += PLAIN_EVERY / 2
    progress.update(10, {"killed": 10})
    assert stream.getvalue() == ""  # a short row prints none
    clock.now += PLAIN_EVERY
    progress.update(60, {"killed": 50, "survived": 10})
    assert stream.getvalue() == "ROW: 60/200 judged, killed 50, survived 10, 0.67/s, ETA 3m30s\n"
    progress.close()
    assert "\r" not in stream.getvalue() and stream.getvalue().count("\n") == 1


def test_an_hour_long_eta_reads_in_hours() -> None:
    clock = Clock()
    progress = Progress("ROW", 2000, stream=io.StringIO(), live=True, clock=clock)
    clock.now += 100.0
    assert progress.line(50, {}).endswith("0.50/s, ETA 1h05m")


def test_gates_mutate_draws_one_live_line_per_row(example: Example, monkeypatch: pytest.MonkeyPatch) -> None:
    judged: list[str] = []
    _recording(monkeypatch, judged, fake=True)
    plain = example.gates("mutate", "--json", "out/plain.json")  # captured output is not a terminal: no live line
    assert plain.code == 0 and judged and "\r" not in plain.out and "judged, killed" not in plain.out, plain.out
    judged.clear()
    monkeypatch.setattr(mutate, "Progress", functools.partial(Progress, live=True))  # as on a terminal
    result = example.gates("mutate", "--json", "out/m.json")
    assert result.code == 0, result.text
    killed = (len(judged) + 1) // 2
    assert (f"\rEXAMPLE-ROW: {len(judged)}/{len(judged)} judged, killed {killed}, survived {len(judged) - killed}, "
            in result.out), result.out


def test_gates_audit_shows_a_line_per_row_in_place_of_pytest_letters(example: Example,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    plain = example.gates("audit")
    assert plain.code == 0 and "\r" not in plain.out and "...." in plain.out, plain.out
    monkeypatch.setattr(RowProgress.__init__, "__defaults__", (None, True))  # as on a terminal
    live = example.gates("audit")
    assert live.code == 0, live.text
    assert "\rEXAMPLE-ROW: 4/4 items, passed 4, failed 0, skipped 0, " in live.out, live.out
    assert "...." not in live.out and "EXAMPLE-ROW  page-bytes  fails (case 'fp16-page')  3/3 rejected" in live.out


def test_a_shard_run_shows_a_line_per_row_as_on_a_terminal(example: Example, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RowProgress.__init__, "__defaults__", (None, True))  # as on a terminal
    shard = example.gates("run", "--marker", "cpu", "--shard", "1/1", "--json", "out/shard.json")
    assert shard.code == 0, shard.text
    items = json.loads((example.root / "out" / "shard.json").read_text(encoding="utf-8"))
    assert items["meta"]["shard"]["count"] == 1
    assert "\rEXAMPLE-ROW: 7/7 items, passed 7, failed 0, skipped 0, " in shard.out, shard.out  # cases, properties, known-bads
    whole = example.gates("run", "--marker", "cpu")  # a run that is not a shard keeps pytest's own lines
    assert whole.code == 0 and "\r" not in whole.out and "...." in whole.out, whole.out
