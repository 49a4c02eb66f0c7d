"""An implementation's own claims (docs/gating-a-port.md, "Your port's own claims"): `claims` of `[tool.vllm-gates.implementations.NAME]` states
the lifecycle state it claims per row and milestone; whatever it does not state keeps the roadmap's claim.

    [tool.vllm-gates.implementations.myport.claims]
    CAPI-ABI = "GATING"                                             # the row and each of its milestones
    ROAD-V1-MEM = { state = "ACTIVE", milestones = { M1 = "DONE" } }  # the row's own state, and milestone M1's

The roadmap stays the Python port's (the team's) truth; `--impl NAME` judges NAME against the claims resolved here.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from _vllm_gates.base.errors import Location, Problem
from _vllm_gates.base.tomlsource import SECTION, toml_key
from _vllm_gates.definitions.model import STATES, Roadmap

FORMS = 'ROW = "STATE", or ROW = { state = "STATE", milestones = { ID = "STATE" } }'


@dataclass(frozen=True)
class Claim:
    """One state an implementation claims: for a row's own claim (milestone None), for one milestone, or, written
    `ROW = "STATE"`, for the row and every milestone of it (``every_milestone``)."""

    row: str
    milestone: str | None
    state: str
    key: str  # the key of [tool.vllm-gates] that writes it, e.g. implementations.myport.claims.ROW.milestones.M1
    location: Location
    every_milestone: bool = False


def read_claims(name: str, value: Any, problem: Callable[[str, str], None],
                where: Callable[[str], Location]) -> tuple[Claim, ...]:
    """The `claims` table of implementation ``name``; a problem names the key and the value for each malformed entry,
    an unknown state among them (rows and milestones are checked against the roadmap by ``claim_problems``)."""
    base = ("implementations", name, "claims")
    if not isinstance(value, dict) or not value:
        problem(toml_key(base), f"expected a table of rows, each {FORMS}; got {value!r}")
        return ()
    found: list[Claim] = []

    def state(parts: tuple[str, ...], text: Any, row: str, milestone: str | None, every: bool = False) -> None:
        key = toml_key(parts)
        if not isinstance(text, str) or text not in STATES:
            problem(key, f"unknown state {text!r} (accepted: {', '.join(STATES)})")
        else:
            found.append(Claim(row, milestone, text, key, where(key), every))

    for row, body in value.items():
        parts = (*base, row)
        if isinstance(body, str):
            state(parts, body, row, None, every=True)
            continue
        if not isinstance(body, dict) or not body or set(body) - {"state", "milestones"}:
            extra = sorted(set(body) - {"state", "milestones"}) if isinstance(body, dict) else []
            why = f"unknown key {extra[0]!r} (accepted: milestones, state)" if extra else f"expected {FORMS}; got {body!r}"
            problem(toml_key(parts), why)
            continue
        if "state" in body:
            state((*parts, "state"), body["state"], row, None)
        milestones = body.get("milestones", {})
        if not isinstance(milestones, dict) or ("milestones" in body and not milestones):
            problem(toml_key((*parts, "milestones")), f"expected a table of milestones, ID = \"STATE\"; got {milestones!r}")
            continue
        for milestone, text in milestones.items():
            state((*parts, "milestones", milestone), text, row, milestone)
    return tuple(found)


def claim_problems(roadmap: Roadmap, claims: tuple[Claim, ...]) -> list[Problem]:
    """Claims of rows or milestones the roadmap does not have, each at the line of pyproject.toml that writes it."""
    problems = []
    for claim in claims:
        row = roadmap.row(claim.row)
        if row is None:
            message = f"row {claim.row!r} is not in {roadmap.path} (rows: {', '.join(r.id for r in roadmap.rows)})"
        elif claim.milestone is not None and row.milestone(claim.milestone) is None:
            message = (f"milestone {claim.milestone!r} is not a milestone of {claim.row} in {roadmap.path} "
                       f"(milestones: {', '.join(m.id for m in row.milestones)})")
        else:
            continue
        problems.append(Problem(claim.location, f"[{SECTION}] {claim.key}", message))
    return problems


def claimed_roadmap(roadmap: Roadmap, impl: str, claims: tuple[Claim, ...]) -> Roadmap:
    """The roadmap as implementation ``impl`` claims it: its own states where it states them (each marked as its
    own), the roadmap's elsewhere. Claims of unknown rows or milestones are refused before (claim_problems)."""
    if not claims:
        return roadmap
    own = {(c.row, c.milestone): c.state for c in claims}
    every = {c.row: c.state for c in claims if c.every_milestone}
    rows = []
    for row in roadmap.rows:
        milestones = tuple(replace(m, state=state, claimed_by=impl) if (state := own.get((row.id, m.id), every.get(row.id)))
                           else m for m in row.milestones)
        state = own.get((row.id, None))
        rows.append(replace(row, milestones=milestones, **({"state": state, "claimed_by": impl} if state else {})))
    return replace(roadmap, rows=tuple(rows))
