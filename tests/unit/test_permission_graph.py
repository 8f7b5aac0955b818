"""The permission graph (C2, C14): no path of tuples no access, removal removes derived
access, roles nest, groups/teams count, super_admin reaches everything; explain paths."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from domain.portal.graph import (
    RANK,
    CheckRequest,
    ListObjectsRequest,
    RelationTuple,
    TupleGraph,
    explain,
    group_ref,
    identity_tuples,
    project_ref,
    team_ref,
    user_ref,
    userset,
)
from domain.portal.relations import graph_grants, project_tuples
from domain.shared.access import ROLES, SUPER_ADMIN_GROUP, may_control, may_read

USERS = ["ann", "bob", "cy"]
GROUPS = ["/org/eng", "/org/eng/api", "/org/ops", "/org/teams/red"]
PROJECTS = ["p1", "p2"]

subjects = st.one_of(
    st.sampled_from(USERS).map(user_ref),
    st.sampled_from(GROUPS).map(lambda g: userset(group_ref(g))),
    st.just(userset(team_ref("red"))),
)
tuples_st = st.lists(
    st.builds(RelationTuple, st.sampled_from(PROJECTS).map(project_ref), st.sampled_from(ROLES), subjects),
    max_size=12,
)
memberships = st.dictionaries(st.sampled_from(USERS), st.lists(st.sampled_from(GROUPS), max_size=3))


def graph_over(tuples: list[RelationTuple]) -> TupleGraph:
    def tuples_of(_store: str, obj: str) -> list[RelationTuple]:
        return [t for t in tuples if t.object == obj]

    def objects_of(_store: str, _type: str):
        return [(project_ref(p), tuples_of("", project_ref(p))) for p in PROJECTS]

    return TupleGraph(tuples_of, objects_of)


def reaches(user: str, groups: list[str], relation: str, obj: str, tuples: list[RelationTuple]) -> bool:
    ctx = identity_tuples(user, groups)
    return graph_over(tuples).check(
        CheckRequest(store="t", user=user_ref(user), relation=relation, object=obj, contextual_tuples=ctx)
    ).allowed


@settings(max_examples=150, deadline=None)
@given(tuples_st, memberships, st.sampled_from(USERS), st.sampled_from(ROLES), st.sampled_from(PROJECTS))
def test_no_access_without_a_path_of_tuples(tuples, members, user, relation, project) -> None:
    obj, groups = project_ref(project), members.get(user, [])
    answer = explain(user_ref(user), relation, obj, tuples, identity_tuples(user, groups))
    ctx = set(identity_tuples(user, groups))
    if answer.allowed:
        granting = [s for s in answer.path if s.kind == "tuple"]
        assert len(granting) == 1
        step = granting[0]
        assert RelationTuple(step.object, step.relation, step.subject) in tuples  # a stored tuple
        assert step.object == obj and RANK[step.relation] >= RANK[relation]
        if step.subject != user_ref(user):  # through a group or team the edge asserted
            assert RelationTuple(step.subject.split("#")[0], "member", user_ref(user)) in ctx
    else:
        assert answer.path == ()
    # An independent oracle: some tuple on obj at/above relation naming the user or one of their usersets.
    names = {user_ref(user)} | {f"{t.object}#member" for t in ctx}
    oracle = any(t.object == obj and RANK[t.relation] >= RANK[relation] and t.subject in names for t in tuples)
    assert answer.allowed == oracle


@settings(max_examples=150, deadline=None)
@given(tuples_st, memberships, st.sampled_from(USERS), st.sampled_from(ROLES), st.sampled_from(PROJECTS))
def test_removing_a_participant_removes_every_derived_access(tuples, members, user, relation, project) -> None:
    groups = members.get(user, [])
    remaining = [t for t in tuples if t.subject != user_ref(user)]
    # Their own tuples gone, what remains is exactly what groups/teams grant.
    via_groups = reaches(user, groups, relation, project_ref(project), remaining)
    assert reaches(user, [], relation, project_ref(project), remaining) is False
    assert reaches(user, groups, relation, project_ref(project), tuples) >= via_groups
    # Leaving every group as well leaves nothing.
    listed = graph_over(remaining).list_objects(
        ListObjectsRequest(store="t", user=user_ref(user), relation="viewer", type="project")
    )
    assert listed == []


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(ROLES), st.sampled_from(ROLES), st.sampled_from(USERS))
def test_nested_roles_hold(held: str, asked: str, user: str) -> None:
    tuples = [RelationTuple(project_ref("p1"), held, user_ref(user))]
    assert reaches(user, [], asked, project_ref("p1"), tuples) == (RANK[held] >= RANK[asked])
    assert reaches(user, [], asked, project_ref("p2"), tuples) is False


def test_explain_names_membership_tuple_and_implied_role() -> None:
    tuples = project_tuples("p1", [], group_paths=["/org/eng"], team_keys=["red"])
    answer = explain(user_ref("ann"), "viewer", project_ref("p1"), tuples, identity_tuples("ann", ["/org/eng/api"]))
    assert answer.allowed
    assert [(s.kind, s.object, s.relation, s.subject) for s in answer.path] == [
        ("membership", "group:/org/eng", "member", "user:ann"),
        ("tuple", "project:p1", "contributor", "group:/org/eng#member"),
        ("implied", "project:p1", "viewer", "project:p1#contributor"),
    ]
    team = explain(user_ref("bob"), "contributor", project_ref("p1"), tuples, identity_tuples("bob", ["/org/teams/red"]))
    assert team.allowed and team.path[0].object == "team:red"
    assert not explain(user_ref("cy"), "viewer", project_ref("p1"), tuples, identity_tuples("cy", ["/org/ops"])).allowed


def test_super_admin_reaches_everything() -> None:
    answer = explain(user_ref("root"), "owner", project_ref("nothing"), [], identity_tuples("root", [SUPER_ADMIN_GROUP]))
    assert answer.allowed and answer.path[0].kind == "super_admin"
    assert not explain(user_ref("root"), "owner", project_ref("nothing"), [], ()).allowed


@dataclass(frozen=True)
class Who:
    subject_key: str
    groups: tuple[str, ...] = ()
    is_super_admin: bool = False


def test_access_seam_asks_the_graph() -> None:
    tuples = project_tuples(
        "p1", [{"subject_key": "Ann", "project_role": "maintainer"}, {"subject_key": "bob", "project_role": "viewer"}],
        group_paths=["/org/eng"], owner_group_paths=["/org/leads"],
    )
    grants = graph_grants(graph_over(tuples), "t", "p1")
    assert may_control(Who("ann"), grants) and may_read(Who("ann"), grants)
    assert may_read(Who("bob"), grants) and not may_control(Who("bob"), grants)
    assert may_read(Who("eve", ("/org/eng/web",)), grants) and not may_control(Who("eve", ("/org/eng",)), grants)
    assert may_control(Who("lee", ("/org/leads",)), grants)
    assert not may_read(Who("zed"), grants)
    assert may_control(Who("zed", is_super_admin=True), grants)
