"""Load spec/roadmap.yaml: rows, milestones and the lifecycle states they claim."""
from __future__ import annotations

import re
from pathlib import Path

from _vllm_gates.base.errors import DefinitionError
from _vllm_gates.base.fields import Reader, show
from _vllm_gates.base.yamlsource import YMap, load_yaml, location_of
from _vllm_gates.definitions.model import STATES, Milestone, Roadmap, Row

ROW_ID = re.compile(r"^[A-Z][A-Z0-9]*(-[A-Z0-9]+)*$")
MILESTONE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _state(reader: Reader, mapping: YMap, key: str) -> str:
    state = reader.string(mapping, "state", key)
    if state is not None and state not in STATES:
        reader.problem(location_of(mapping, "state"), key, f"unknown state {show(state)} (accepted: {', '.join(STATES)})")
        return "INVENTORIED"
    return state or "INVENTORIED"


def _upstream(reader: Reader, row: YMap, key: str, pinned: str | None, check_pin: bool) -> str | None:
    """A row's `upstream:` parity claim: the pinned release, as text."""
    if "upstream" not in row:
        return None
    claim = row["upstream"]
    where = location_of(row, "upstream")
    if not isinstance(claim, str) or not claim:
        reader.problem(where, f"{key}.upstream", f"expected the upstream release as text, e.g. \"0.33.0\", got {show(claim)}")
        return None
    if not check_pin:
        return claim
    if pinned is None:
        reader.problem(where, f"{key}.upstream", "claims upstream parity, but pyproject.toml pins no release ([tool.vllm-gates.upstream])")
    elif claim != pinned:
        reader.problem(where, f"{key}.upstream", f"claims parity with {show(claim)}, but the project pins {show(pinned)} "
                                                 "([tool.vllm-gates.upstream] version)")
    return claim


def _mutation(reader: Reader, milestone: YMap, key: str) -> float | None:
    """A milestone's `mutation:` requirement (docs/reports.md): the least mutation score its DONE needs, in (0, 1]."""
    if "mutation" not in milestone:
        return None
    value = milestone["mutation"]
    if type(value) not in (int, float) or not 0 < value <= 1:
        reader.problem(location_of(milestone, "mutation"), f"{key}.mutation",
                       f"expected a mutation score in (0, 1], e.g. 0.9, got {show(value)}")
        return None
    return float(value)


def load_roadmap(path: Path, display_path: str | None = None, pinned: str | None = None, check_pin: bool = False) -> Roadmap:
    """Parse and validate the roadmap; raise DefinitionError listing every problem. With ``check_pin``, a row's
    `upstream:` claim must name ``pinned``, the upstream release the project pins."""
    shown = display_path or str(path)
    document = load_yaml(path, shown, what="roadmap")  # a regular file within the size and node limits
    reader = Reader(shown)
    top = reader.mapping(document, "", None)
    rows: list[Row] = []
    if top is not None:
        reader.keys(top, "", {"rows"}, set())
        row_map = reader.mapping(top.get("rows"), "rows", location_of(top, "rows")) if "rows" in top else None
        for row_id, body in (row_map or {}).items():
            key = f"rows.{row_id}"
            if not isinstance(row_id, str) or not ROW_ID.match(row_id):
                reader.problem(location_of(row_map, row_id), key, f"row id {show(row_id)} does not match {ROW_ID.pattern}")
                continue
            row = reader.mapping(body, key, location_of(row_map, row_id))
            if row is None:
                continue
            reader.keys(row, key, {"title", "state", "milestones"}, {"notes", "upstream"})
            milestones = []
            ms_map = reader.mapping(row.get("milestones"), f"{key}.milestones", location_of(row, "milestones")) if "milestones" in row else None
            for ms_id, ms_body in (ms_map or {}).items():
                ms_key = f"{key}.milestones.{ms_id}"
                if not isinstance(ms_id, str) or not MILESTONE_ID.match(ms_id):
                    reader.problem(location_of(ms_map, ms_id), ms_key, f"milestone id {show(ms_id)} does not match {MILESTONE_ID.pattern}")
                    continue
                ms = reader.mapping(ms_body, ms_key, location_of(ms_map, ms_id))
                if ms is None:
                    continue
                reader.keys(ms, ms_key, {"title", "state"}, {"notes", "mutation"})
                milestones.append(Milestone(ms_id, reader.string(ms, "title", ms_key) or "", _state(reader, ms, ms_key),
                                            mutation=_mutation(reader, ms, ms_key)))
            if ms_map is not None and not milestones:
                reader.problem(location_of(row, "milestones"), f"{key}.milestones", "a row needs at least one milestone")
            rows.append(Row(row_id, reader.string(row, "title", key) or "", _state(reader, row, key), tuple(milestones),
                            _upstream(reader, row, key, pinned, check_pin)))
    if reader.problems:
        raise DefinitionError(reader.problems)
    return Roadmap(shown, tuple(rows))
