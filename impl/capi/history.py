"""The header's version history, checked append-only: each version's members are a prefix of the next's, every version
bump is explained by a new member or by the version history (CAPI-3.1 to CAPI-3.6).

Reads either convention of impl.capi.header_reader ("[vN]" annotations, or the port's "(ABI vN)" headings and version
log, as in the C++ port's include/vllm.h, which bumped v17 and v18 for entry points only).
"""
from __future__ import annotations

from typing import Mapping, Sequence

from impl.capi.errors import AbiHistoryError
from impl.capi.header_reader import (ANNOTATIONS, HEADINGS, HeaderFacts, Member, read_abi_version,
                                     read_annotation_history, read_header, read_members)
from impl.capi.layout import offsets_of

__all__ = ["ANNOTATIONS", "HEADINGS", "Member", "check_history", "header_history", "read_abi_version",
           "read_annotation_history", "read_header", "read_members"]


def _moved_offsets(members: Sequence[Member], released: int) -> str:
    """Which members of the v``released`` struct sit at other offsets in the struct as declared."""
    before = offsets_of([(m.name, m.ctype) for m in members if m.since <= released])
    now = offsets_of([(m.name, m.ctype) for m in members])
    if isinstance(before, str) or isinstance(now, str):
        return f"offsets not computed: {before if isinstance(before, str) else now}"
    moved = [f"{name} {offset} -> {now[name]}" for name, offset in before.items() if now[name] != offset]
    if not moved:
        return f"no v{released} offset moved (the member fills padding), but later versions would read it as theirs"
    return f"offsets that moved from the v{released} layout: {', '.join(moved)}"


def check_order(members: Sequence[Member]) -> None:
    """Versions never decrease along the struct: a member inserted mid-struct is refused, naming it and the
    offsets it moves for the callers of the version before it."""
    for before, after in zip(members, members[1:]):
        if after.since < before.since:
            raise AbiHistoryError(
                f"member {before.name!r} [v{before.since}] stands before {after.name!r} [v{after.since}]: a "
                f"v{before.since} member was inserted mid-struct, moving {after.name!r} for v{after.since} callers; "
                f"{_moved_offsets(members, before.since - 1)}")


def check_bumps(members: Sequence[Member], abi_version: int, log: Mapping[int, Sequence[str]]) -> None:
    """No member is newer than ``VLLM_ABI_VERSION``; every version without a new member has a history entry (a bump
    for entry points only), and the history has no entry past ``VLLM_ABI_VERSION``."""
    newest = max(m.since for m in members)
    if newest > abi_version:
        raise AbiHistoryError(f"VLLM_ABI_VERSION is {abi_version} but the newest member is from v{newest}: "
                              "a new member needs a version bump")
    with_members = {m.since for m in members}
    for version in range(1, abi_version + 1):
        if version not in with_members and version not in log:
            raise AbiHistoryError(f"v{version} has no member and no entry in the version history: VLLM_ABI_VERSION "
                                  f"{abi_version} counts a version bump the history does not explain")
    beyond = sorted(v for v in log if not 1 <= v <= abi_version)
    if beyond:
        raise AbiHistoryError(f"the version history has entries for {['v%d' % v for v in beyond]} outside "
                              f"v1..v{abi_version}: a bump the VLLM_ABI_VERSION macro does not have")


def check_log(facts: HeaderFacts) -> None:
    """The history agrees with the members' versions: an annotations header has one entry per version whose
    ``+member`` words are exactly the members annotated with it; a headings header's entries name as
    ``vllm_model_params.<member>`` only members headed with their version."""
    since = {m.name: m.since for m in facts.members}
    if facts.convention == ANNOTATIONS:
        if sorted(facts.log) != list(range(1, facts.abi_version + 1)):
            raise AbiHistoryError(f"the history needs exactly one entry for each of v1..v{facts.abi_version}, "
                                  f"it has {sorted(facts.log)}")
        for version, listed in facts.log.items():
            annotated = [name for name, v in since.items() if v == version]
            if sorted(listed) != sorted(annotated):
                raise AbiHistoryError(f"the v{version} history entry appends {sorted(listed)} but the members "
                                      f"annotated [v{version}] are {sorted(annotated)}")
        return
    for version, named in sorted(facts.log.items()):
        for name in named:
            if name not in since:
                raise AbiHistoryError(f"the v{version} version-log entry names vllm_model_params.{name}, but the "
                                      f"struct declares no member {name!r}: a bump the struct does not show")
            if since[name] != version:
                raise AbiHistoryError(f"the v{version} version-log entry names vllm_model_params.{name}, but the "
                                      f"struct has {name!r} in its (ABI v{since[name]}) run: a member needs its own "
                                      "heading, or it joins the run before it")


def _check_names(members: Sequence[Member]) -> None:
    names = [m.name for m in members]
    if len(set(names)) != len(names):
        raise AbiHistoryError(f"a member is declared twice: {names}")
    if min(m.since for m in members) < 1:
        raise AbiHistoryError(f"versions start at v1; got members {[(m.name, m.since) for m in members]}")


def versions(members: Sequence[Member], abi_version: int) -> dict[str, object]:
    """``{"abi_version": N, "versions": {"v1": [...], ..., "vN": [...]}}``: each version's members, in order."""
    return {"abi_version": abi_version,
            "versions": {f"v{v}": [m.name for m in members if m.since <= v] for v in range(1, abi_version + 1)}}


def check_history(facts: HeaderFacts) -> dict[str, object]:
    """:func:`versions` of a header whose history holds: names, order, bumps and the history's entries."""
    members = list(facts.members)
    _check_names(members)
    check_order(members)
    check_bumps(members, facts.abi_version, facts.log)
    check_log(facts)
    return versions(members, facts.abi_version)


def header_history(header_text: str) -> dict[str, object]:
    """:func:`check_history` of a header's text, in whichever convention it is written."""
    return check_history(read_header(header_text))
