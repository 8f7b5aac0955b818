"""Pure rules of the gate: which repository, what evidence counts, checks and promotion."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from domain.shared.ids import is_valid_repo_slug

ASSEMBLY = "assembly"
IMPLEMENTATION = "implementation"
ORCHESTRATION = "orchestration"
EVIDENCE_DIR = ".squadops/evidence"

CHECK_EVIDENCE = "squadops-gate/evidence"
CHECK_SCOPE = "squadops-gate/scope"
CHECK_RUN = "squadops-gate/run"
CHECK_NAMES = (CHECK_EVIDENCE, CHECK_SCOPE, CHECK_RUN)

_pretty = msgspec.json.Encoder(order="sorted").encode


def valid_repo(repo: str) -> bool:
    """``owner/name``, each part an identifier (C12: no ``.``, so no ``..`` and no ``.git``)."""
    return is_valid_repo_slug(repo)


def is_assembly(binding: Mapping[str, Any]) -> bool:
    return binding.get("repository_type") == ASSEMBLY or binding.get("repository_key") == ASSEMBLY


def choose_binding(bindings: Sequence[Mapping[str, Any]], agent_key: str) -> Mapping[str, Any] | None:
    """The repository a run's proposal is published to: the binding named like the agent
    (a delivery lane such as ``backend``), else the first writable lane, else the assembly."""
    usable = [b for b in bindings if valid_repo(str(b.get("vcs_repo_slug", "")))]
    for binding in usable:
        if agent_key and binding.get("repository_key") == agent_key:
            return binding
    lanes = [b for b in usable if not is_assembly(b)]
    if lanes:
        return lanes[0]
    return usable[0] if usable else None


def evidence_scope(repository_type: str, repository_key: str) -> str:
    """A pull request touching only the assembly repository is orchestration output, not
    implementation evidence."""
    if repository_type == ASSEMBLY or repository_key == ASSEMBLY:
        return ORCHESTRATION
    return IMPLEMENTATION


def branch_name(thread_key: str, attempt: int, tenant: str = "default") -> str:
    """The run's branch. Threads of every tenant may publish to one repository (the gate's
    default repository, C18): another tenant's runs name their tenant, so their branches
    never meet (a thread key holds no ``/``)."""
    if tenant == "default":
        return f"squadops/gate/{thread_key}/run-{attempt}"
    return f"squadops/gate/{tenant}/{thread_key}/run-{attempt}"


def publication_mode(*, dry_run: bool, publish: bool) -> str:
    """``dry_run``: nothing is written; ``preview``: the branch only; ``pull_request``."""
    if dry_run:
        return "dry_run"
    return "pull_request" if publish else "preview"


def artifact_paths(thread_key: str, attempt: int) -> tuple[str, str]:
    """The evidence pack (JSON) and its readable summary (Markdown)."""
    base = f"{EVIDENCE_DIR}/{thread_key}/run-{attempt}"
    return f"{base}.json", f"{base}.md"


def labels(*, scope: str, agent_key: str, scenario_key: str) -> list[str]:
    found = ["squadops-gate", f"evidence:{scope}"]
    if agent_key:
        found.append(f"agent:{agent_key}")
    if scenario_key:
        found.append(f"scenario:{scenario_key}")
    return found


@dataclass(frozen=True)
class Check:
    name: str
    conclusion: str  # success, neutral, failure
    summary: str


def evidence_check(pack: bytes | None, expected: Mapping[str, Any]) -> Check:
    """The evidence pack as committed reads back and names this thread's run."""
    if pack is None:
        return Check(CHECK_EVIDENCE, "failure", "The evidence pack is not in the pushed commit.")
    try:
        found = msgspec.json.decode(pack)
    except msgspec.DecodeError as exc:
        return Check(CHECK_EVIDENCE, "failure", f"The evidence pack is not JSON: {exc}.")
    wrong = [k for k, v in expected.items() if not isinstance(found, dict) or found.get(k) != v]
    if wrong:
        return Check(CHECK_EVIDENCE, "failure", f"The evidence pack disagrees on {', '.join(sorted(wrong))}.")
    return Check(CHECK_EVIDENCE, "success", "The evidence pack in the pushed commit names this run.")


def scope_check(scope: str, repo: str) -> Check:
    if scope == IMPLEMENTATION:
        return Check(CHECK_SCOPE, "success", f"{repo} is a delivery repository: implementation evidence.")
    return Check(CHECK_SCOPE, "neutral", f"{repo} is the assembly repository: orchestration output, not implementation evidence.")


def run_check(studio_run: Mapping[str, Any] | None) -> Check:
    """The studio run the proposal belongs to: none of its agents may be blocked."""
    if studio_run is None:
        return Check(CHECK_RUN, "neutral", "No studio run holds this thread's proposal.")
    blocked = sorted(s["agent_id"] for s in studio_run["sessions"] if s["live_status"] == "blocked")
    if blocked:
        return Check(CHECK_RUN, "failure", f"Blocked agents in run {studio_run['run_id']}: {', '.join(blocked)}.")
    return Check(CHECK_RUN, "success", f"Run {studio_run['run_id']} is {studio_run['status']} with no blocked agent.")


def promotion(*, published: bool, checks: Sequence[Check]) -> tuple[str, list[str]]:
    """``promote`` a published run whose checks all succeed; ``reject`` one with a failed
    check; else ``hold`` (not published, or a check could not say)."""
    failed = [f"{c.name}: {c.summary}" for c in checks if c.conclusion == "failure"]
    if failed:
        return "reject", failed
    unsure = [f"{c.name}: {c.summary}" for c in checks if c.conclusion != "success"]
    if not published:
        return "hold", ["Not published as a pull request.", *unsure]
    if unsure or not checks:
        return "hold", unsure or ["No check ran."]
    return "promote", [f"{c.name}: {c.summary}" for c in checks]


def evidence_pack(facts: Mapping[str, Any]) -> bytes:
    """The evidence pack committed with the proposal (sorted JSON, one trailing newline)."""
    return _pretty(dict(facts)) + b"\n"


def evidence_summary(facts: Mapping[str, Any]) -> bytes:
    lines = [
        f"# Gate evidence: {facts['thread_key']} run {facts['attempt']}",
        "",
        f"- studio run: {facts['run_id']}",
        f"- proposal: {facts['proposal_id'] or '(none)'}",
        f"- repository: {facts['repo']} ({facts['repository_key'] or 'default'})",
        f"- agent: {facts['agent_key'] or '(gate)'}; engine: {facts['engine_key']}",
    ]
    scenario = facts.get("scenario")
    if scenario:
        lines += ["", f"## Scenario {scenario['scenario_key']}: {scenario['title']}", "", scenario["objective"], ""]
        lines += [f"{i}. {s['action']} {s['name'] or s['path']}" for i, s in enumerate(scenario["probe_steps"], 1)]
    if facts.get("notes"):
        lines += ["", "## Notes", "", str(facts["notes"])]
    return ("\n".join(lines) + "\n").encode()


def pr_text(facts: Mapping[str, Any], scope: str) -> tuple[str, str]:
    """Title and body of the pull request."""
    subject = facts["proposal_id"] or facts["thread_key"]
    title = f"squadops gate: {subject} (run {facts['attempt']})"
    body = "\n".join(
        [
            f"Publishes proposal `{facts['proposal_id'] or '(none)'}` of gate thread `{facts['thread_key']}`.",
            "",
            f"- studio run: `{facts['run_id']}`",
            f"- evidence: {scope}",
            f"- scenario: `{facts['scenario_key'] or '(none)'}`",
            "",
            str(facts.get("notes") or ""),
        ]
    ).rstrip() + "\n"
    return title, body


def summary_comment(checks: Sequence[Check], decision: str, scope: str) -> str:
    rows = "\n".join(f"| {c.name} | {c.conclusion} | {c.summary} |" for c in checks)
    return (
        f"Gate summary: evidence scope **{scope}**, promotion decision **{decision}**.\n\n"
        f"| check | conclusion | summary |\n|---|---|---|\n{rows}\n"
    )
