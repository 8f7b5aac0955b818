"""The access rules (C2, C14): nested project roles, super_admin everywhere, no path no access."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.shared.access import (
    ROLES,
    ProjectGrants,
    may_control,
    may_read,
    require_control,
    require_read,
)
from domain.shared.errors import Forbidden


@dataclass(frozen=True)
class Who:
    subject_key: str
    is_super_admin: bool = False


def grants(**roles: str) -> ProjectGrants:
    return ProjectGrants.from_participants("acme", [{"subject_key": k, "project_role": r} for k, r in roles.items()])


@pytest.mark.parametrize(("role", "reads", "controls"), [
    ("viewer", True, False), ("contributor", True, False), ("maintainer", True, True), ("owner", True, True),
])
def test_roles_nest(role: str, reads: bool, controls: bool) -> None:
    g = grants(ann=role)
    assert (may_read(Who("ann"), g), may_control(Who("ann"), g)) == (reads, controls)


def test_super_admin_reaches_everything_and_strangers_nothing() -> None:
    g = grants(ann="owner")
    assert may_control(Who("root", is_super_admin=True), g) and may_read(Who("root", is_super_admin=True), g)
    assert not may_read(Who("bob"), g)
    with pytest.raises(Forbidden) as denied:
        require_read(Who("bob"), g)
    assert denied.value.code == "not_a_participant"
    with pytest.raises(Forbidden) as denied:
        require_control(Who("bob"), grants(bob="contributor"))
    assert denied.value.code == "control_role_required"


def test_keys_compare_lower_cased_and_the_highest_role_counts() -> None:
    g = ProjectGrants.from_participants("acme", [
        {"subject_key": "Ann@Example.com", "project_role": "viewer"},
        {"subject_key": "ann@example.com", "project_role": "owner"},
        {"subject_key": "cid@example.com", "project_role": "something-new"},
    ])
    assert may_control(Who("ann@example.com"), g)
    assert may_read(Who("cid@example.com"), g) and not may_control(Who("cid@example.com"), g)


@given(
    participants=st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.sampled_from(ROLES)),
    who=st.sampled_from(["a", "b", "c", "d", "e"]),
)
def test_no_access_without_a_grant_and_control_implies_read(participants: dict[str, str], who: str) -> None:
    g = grants(**participants)
    if who not in participants:
        assert not may_read(Who(who), g) and not may_control(Who(who), g)
    if may_control(Who(who), g):
        assert may_read(Who(who), g)
    held = participants.get(who)
    assert may_control(Who(who), g) == (held in ("maintainer", "owner"))
