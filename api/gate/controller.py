"""Gate endpoints under ``/v1/admin/gate`` (super_admin, C2).

- ``POST threads/{thread_key}/run``: publishes the thread's proposal as a pull request with
  evidence through the vcs port, authored by the gate's application identity; answers the
  gate run record.
- ``GET threads/{thread_key}/runs``: the thread's runs, from the gate runs read model.
- ``GET scenarios/{scenario_key}``: a shipped scenario with its probe steps (404 if unknown).
"""

from __future__ import annotations

import re
from typing import Annotated

import msgspec
from litestar import Router, get
from litestar.datastructures import State
from litestar.params import JSONBody, PathParameter

from api.auth import TENANT_HEADER, EdgeJwt
from api.context import CallerDep, caller_dependency, part
from api.errors import RequestInvalid
from api.gate.dto import GateRunIn, GateRunList, GateRunOut
from api.read_your_writes import command
from domain.gate.commands import GateCommands, GateRequest
from domain.gate.scenarios import Scenario
from domain.shared.ids import BRANCH_PART_PATTERN, ID_PATTERN
from projections.engine.store import DocStore
from projections.gate.runs import gate_runs_partition

KeyPath = Annotated[str, PathParameter(pattern=ID_PATTERN)]
BRANCH_PART = re.compile(BRANCH_PART_PATTERN)
# A thread's key names its branches (``squadops/gate/<thread_key>/run-<n>``): no leading ``-``.
ThreadKeyPath = Annotated[str, PathParameter(pattern=BRANCH_PART_PATTERN, description="[A-Za-z0-9_-], not starting with -")]
_run = msgspec.json.Decoder(GateRunOut)


def gate_commands(state: State) -> GateCommands:
    return part(state, "gate")


@command("/threads/{thread_key:str}/run", status_code=200, summary="Run a gate thread")
def run_thread(
    thread_key: ThreadKeyPath, data: JSONBody[GateRunIn], state: State, caller: CallerDep
) -> GateRunOut:
    # The body may name the tenant (the sample's ``default``); a tenant header naming another
    # one is a contradiction.
    tenant = data.tenant_id or caller.tenant
    if data.tenant_id is not None and caller.tenant not in (data.tenant_id, "default"):
        raise RequestInvalid(["body", "tenant_id"], "tenant_id differs from the request's tenant", "value_error", data.tenant_id)
    if not BRANCH_PART.match(tenant):  # its branches name the tenant: no part git would read as an option
        where = ["body", "tenant_id"] if data.tenant_id is not None else ["header", TENANT_HEADER]
        raise RequestInvalid(where, f"a tenant publishing through the gate must match {BRANCH_PART_PATTERN}",
                             "string_pattern_mismatch", tenant)
    # The body's other fields are the request's choices, by the same names.
    choices = msgspec.structs.asdict(data)
    del choices["tenant_id"]
    record = gate_commands(state).run_thread(
        GateRequest(tenant=tenant, thread_key=thread_key, actor=caller.subject_key, **choices)
    )
    return msgspec.convert(record, GateRunOut)


@get("/threads/{thread_key:str}/runs", sync_to_thread=True, summary="Runs of a gate thread")
def thread_runs(thread_key: KeyPath, state: State, caller: CallerDep) -> GateRunList:
    store: DocStore = part(state, "store")
    rows = store.scan("gate_runs", partition=gate_runs_partition(caller.tenant, thread_key), limit=500)
    return GateRunList(items=[_run.decode(row.body) for row in rows])


@get("/scenarios/{scenario_key:str}", sync_to_thread=False, summary="A gate scenario")
def get_scenario(scenario_key: KeyPath, state: State, caller: CallerDep) -> Scenario:
    return gate_commands(state).scenarios.require(scenario_key)


def gate_router(edge: EdgeJwt) -> Router:
    return Router(
        path="/v1/admin/gate",
        route_handlers=[run_thread, thread_runs, get_scenario],
        dependencies=caller_dependency(edge, admin=True),
        tags=["gate"],
    )
