"""Shards with one verdict (docs/evidence.md, "Shards"): `gates run --shard I/N` runs a deterministic slice of the
selected gates and writes its evidence; `gates verdict` over the shards gives the verdicts, claims and exit code of
the unsharded run, refuses shards that do not belong together, and leaves a missing shard's claims unproven."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.cpu


def _verdicts(report: dict[str, Any]) -> dict[str, Any]:
    """What a run judged, per row: each gate's verdict, each claim's verdict and whether it is met."""
    return {row["row"]: {"gates": {g["gate"]: g["verdict"] for g in row["gates"]},
                         "claim": (row["claim"]["verdict"], row["claim"]["claim_met"]),
                         "milestones": [(m["milestone"], m["verdict"], m["claim_met"]) for m in row["milestones"]]}
            for row in report["rows"]}


def _executed(report: dict[str, Any]) -> set[str]:
    return {f"{g['row']}::{g['gate']}" for row in report["rows"] for g in row["gates"] if g["executed"]}


@pytest.fixture
def two_rows(example):
    """EXAMPLE-ROW (PARTIAL: its gpu gate may stay unproven) and OTHER-ROW (ACTIVE), three cpu gates each."""
    example.add_gate("second")
    example.add_gate("third")
    example.add_gate("on-gpu", "[gpu]")
    example.add_row("OTHER-ROW")
    example.set_roadmap({"EXAMPLE-ROW": ("PARTIAL", {"M1": "PARTIAL"}), "OTHER-ROW": ("ACTIVE", {"M1": "ACTIVE"})})
    return example


def _write(path: Path, document: dict[str, Any]) -> str:
    path.write_text(json.dumps(document), encoding="utf-8")
    return str(path)


def test_four_shards_give_the_unsharded_verdict_and_refuse_what_does_not_add_up(two_rows):
    example, out = two_rows, two_rows.root / "out"
    whole, unsharded = example.run_json("--marker", "cpu")
    assert whole.code == 0, whole.text
    shards = []
    for index in range(1, 5):
        result, report = example.run_json("--marker", "cpu", "--shard", f"{index}/4", name=f"shard-{index}.json")
        assert result.code == 0, result.text
        assert report["meta"]["shard"]["index"] == index and report["meta"]["shard"]["count"] == 4
        shards.append(report)
    ran = [_executed(report) for report in shards]
    assert all(ran), ran  # six cpu gates over four shards: none is empty
    assert set().union(*ran) == _executed(unsharded) and sum(len(r) for r in ran) == len(_executed(unsharded))
    paths = [str(out / f"shard-{index}.json") for index in range(1, 5)]
    evidence = [arg for path in paths for arg in ("--evidence", path)]

    merged = example.gates("verdict", *evidence, "--json", str(out / "merged.json"))
    report = json.loads((out / "merged.json").read_text(encoding="utf-8"))
    assert merged.code == whole.code == 0, merged.text
    assert _verdicts(report) == _verdicts(unsharded)
    assert report["rows"][0]["gates"] and "on-gpu" in _verdicts(report)["EXAMPLE-ROW"]["gates"]

    # a shard missing: its gates unproven, and never green (OTHER-ROW's ACTIVE claim would tolerate UNPROVEN)
    missing = example.gates("verdict", *evidence[:-2])
    assert missing.code == 6, missing.text
    assert "shard 4/4 is missing" in missing.err

    # the same shard twice
    twice = example.gates("verdict", *evidence, "--evidence", paths[0])
    assert twice.code == 2 and "overlap: both are shard 1/4" in twice.err, twice.text

    def planted(change, name: str) -> list[str]:
        copy = json.loads(Path(paths[1]).read_text(encoding="utf-8"))
        change(copy)
        return [*evidence[:2], "--evidence", _write(out / name, copy), *evidence[4:]]

    def seed(document): document["meta"]["seed"] = 1234
    def tree(document): document["meta"]["shard"]["tree"] = "0" * 64
    def selection(document): document["meta"]["shard"]["selection"]["marker"] = "all"
    def malformed(document): document["meta"]["shard"]["index"] = 9
    def runs_another_shards_gate(document):
        document["rows"].append({**shards[0]["rows"][0], "gates": shards[0]["rows"][0]["gates"][:1]})

    for change, words in ((seed, ["different seeds", "1234"]), (tree, ["different trees", "000000000000"]),
                          (selection, ["different selections", "'all'"]), (runs_another_shards_gate, ["overlap: both ran gate"]),
                          (malformed, ["malformed meta.shard", "index 9 of 4"])):
        refused = example.gates("verdict", *planted(change, f"planted-{change.__name__}.json"))
        assert refused.code == 2, (change.__name__, refused.text)
        assert all(word in refused.err for word in words), (change.__name__, refused.err)
        assert "planted-" in refused.err, refused.err
        assert change is malformed or "shard-" in refused.err, refused.err  # both files of a pair named


def test_a_failing_gate_fails_the_merged_verdict_as_it_fails_the_run(two_rows):
    example, out = two_rows, two_rows.root / "out"
    text = example.read()
    example.write("gates/rows/example/gate.yaml", text.replace("        expect: 32\n", "        expect: 33\n", 1))  # page-bytes
    whole, unsharded = example.run_json("EXAMPLE-ROW", "--marker", "cpu")
    assert whole.code == 1, whole.text
    evidence = []
    for index in (1, 2):
        example.run_json("EXAMPLE-ROW", "--marker", "cpu", "--shard", f"{index}/2", name=f"shard-{index}.json")
        evidence += ["--evidence", str(out / f"shard-{index}.json")]
    merged = example.gates("verdict", *evidence, "--json", str(out / "merged.json"))
    assert merged.code == 1, merged.text
    assert _verdicts(json.loads((out / "merged.json").read_text(encoding="utf-8"))) == _verdicts(unsharded)
    assert _verdicts(unsharded)["EXAMPLE-ROW"]["gates"]["page-bytes"] == "FAIL"


def test_shards_under_a_drawing_profile_share_a_seed_taken_from_the_tree(example):
    example.add_gate("second")
    evidence = []
    for index in (1, 2):
        result, report = example.run_json("--profile", "dev", "--shard", f"{index}/2", name=f"dev-{index}.json")
        assert result.code == 0, result.text
        assert report["meta"]["profile"] == "dev"
        assert report["meta"]["seed"] == str(int(report["meta"]["shard"]["tree"][:8], 16) % 10**9)
        evidence += ["--evidence", str(example.root / "out" / f"dev-{index}.json")]
    merged = example.gates("verdict", *evidence)
    assert merged.code == 0, merged.text
    given, report = example.run_json("--profile", "dev", "--seed", "7", "--shard", "1/2", name="given.json")
    assert given.code == 0 and report["meta"]["seed"] == "7", given.text


def test_shards_share_a_seed_when_the_environment_and_the_loaded_profile_disagree(example, monkeypatch):
    """CI set, but a drawing profile already loaded in the process (an xdist worker's in-process run): one seed."""
    from hypothesis import settings

    example.add_gate("second")
    monkeypatch.setenv("CI", "true")
    before = settings.get_current_profile_name()
    settings.load_profile("dev")
    try:
        seeds, evidence = set(), []
        for index in (1, 2):
            result, report = example.run_json("--shard", f"{index}/2", name=f"env-{index}.json")
            assert result.code == 0, result.text
            seeds.add(report["meta"]["seed"])
            evidence += ["--evidence", str(example.root / "out" / f"env-{index}.json")]
    finally:
        settings.load_profile(before)
    assert len(seeds) == 1, seeds
    merged = example.gates("verdict", *evidence)
    assert merged.code == 0, merged.text


@pytest.mark.parametrize("value, words", [("0/4", "between 1 and N=4"), ("5/4", "between 1 and N=4"),
                                          ("1/0", "at least 1"), ("two", "expected I/N"), ("1/4/2", "expected I/N"),
                                          ("7/8", "fewer than 8 shards")])
def test_a_shard_that_cannot_be_run_is_a_usage_error_naming_it(example, value, words):
    result = example.gates("run", "--shard", value, "--json", str(example.root / "out.json"))
    assert result.code == 2, result.text
    assert f"--shard {value!r}" in result.err or f"--shard {value}:" in result.err, result.err
    assert words in result.err
    assert not (example.root / "out.json").exists()


def test_a_shard_needs_its_json_report_and_whole_rows(example):
    no_json = example.gates("run", "--shard", "1/1")
    assert no_json.code == 2 and "give --json F" in no_json.err, no_json.text
    picked = example.gates("run", "EXAMPLE-ROW", "--gate", "page-bytes", "--shard", "1/1", "--json", "x.json")
    assert picked.code == 2 and "cannot be combined with --gate" in picked.err, picked.text
    alone = example.gates("run", "--shard-durations", "d.json", "--json", "x.json")
    assert alone.code == 2 and "--shard-durations d.json" in alone.err and "give --shard" in alone.err, alone.text


def test_durations_balance_the_plan_and_a_bad_durations_file_is_refused(example, tmp_path):
    from _vllm_gates.run.shards import ShardGroup, plan, weights

    found = [ShardGroup("R", (name,), (f"f::{name}",), 5) for name in ("a", "b", "c", "d")]
    assert plan(found, 2, weights(found, {})) == [["R::a", "R::c"], ["R::b", "R::d"]]  # by item count: round robin
    slow = weights(found, {("R", "a"): 9.0, ("R", "b"): 1.0, ("R", "c"): 1.0, ("R", "d"): 1.0})
    assert plan(found, 2, slow) == [["R::a"], ["R::b", "R::c", "R::d"]]
    bad = tmp_path / "bad.json"
    bad.write_text("{}", encoding="utf-8")
    result = example.gates("run", "--shard", "1/1", "--json", "x.json", "--shard-durations", str(bad))
    assert result.code == 2 and f"--shard-durations {bad}" in result.err, result.text


def test_a_row_that_does_not_load_runs_whole_in_one_shard_and_errors_the_merged_verdict(example):
    example.add_row("OTHER-ROW")
    example.write("gates/rows/example/gate.yaml", example.read() + example.gate_block("broken").replace("milestone: M1", "milestone: M9"))
    whole, unsharded = example.run_json("--marker", "cpu")
    assert whole.code == 3, whole.text
    evidence = []
    for index in (1, 2):
        result, report = example.run_json("--marker", "cpu", "--shard", f"{index}/2",
                                          name=f"shard-{index}.json")
        evidence += ["--evidence", str(example.root / "out" / f"shard-{index}.json")]
    plan = report["meta"]["shard"]["plan"]
    assert ["EXAMPLE-ROW::<file>"] in [[group["group"] for group in shard] for shard in plan], plan
    merged = example.gates("verdict", *evidence, "--json", str(example.root / "out" / "merged.json"))
    assert merged.code == 3, merged.text
    report = json.loads((example.root / "out" / "merged.json").read_text(encoding="utf-8"))
    assert {row["row"]: row["claim"]["verdict"] for row in report["rows"]} == \
        {row["row"]: row["claim"]["verdict"] for row in unsharded["rows"]} == {"EXAMPLE-ROW": "ERROR", "OTHER-ROW": "PASS"}
