"""The launch form of the board and the project page, sent as JSON (``static/js/lib/forms.js``:
the service takes no form bodies, ``api.browser``) to ``POST /runs``: the launch endpoint's
body (``LaunchRequest``), allowed by the permission graph on the project, launched and
scheduled. The answer names the new run's office, which the read models already show."""

from __future__ import annotations

from typing import Any

import anyio.to_thread
import structlog
from litestar import Response, post
from litestar.datastructures import State
from litestar.params import JSONBody

from api.access import CONTRIBUTE, check
from api.context import CallerDep, studio_commands
from api.read_your_writes import read_your_writes
from api.studio.runs_dto import LaunchRequest
from api.web.portal_view import projects_where

log = structlog.get_logger("squadops.web")

LAUNCH_NEED = CONTRIBUTE  # a contributor launches runs on the project (the permission graph answers)
LAUNCH_ROLE = "contributor"


def launchable(state: State, caller: Any) -> list[str]:
    """The projects the caller may launch runs on (for the board's form)."""
    return projects_where(state, caller, LAUNCH_ROLE)


def templates(state: State) -> list[dict[str, str]]:
    return [{"template_id": t.template_id, "name": f"{t.title} ({t.template_id})"} for t in studio_commands(state).templates.all()]


def _launch(state: State, caller: Any, form: LaunchRequest) -> str:
    check(state, caller.principal, caller.tenant, form.project_slug, LAUNCH_NEED)
    commands = studio_commands(state).runs
    writes = read_your_writes(state)
    mark = writes.mark()
    run, _ = commands.launch_run(
        tenant=caller.tenant,
        template_id=form.template_id,
        project_slug=form.project_slug,
        work_scope=form.work_scope,
        next_goal=form.next_goal,
        launched_by=caller.subject_key,
    )
    commands.request_execution(tenant=caller.tenant, run_id=run.run_id, requested_by=caller.subject_key)
    writes.settle(writes.written(mark))  # the office reads the run at once
    state["wake_ticker"]()
    structlog.contextvars.bind_contextvars(run_id=run.run_id)
    log.info("run_launched_from_page", project_slug=form.project_slug, template_id=form.template_id, tenant=caller.tenant)
    return run.run_id


@post("/runs", name="web_launch", status_code=201)
async def launch_form(data: JSONBody[LaunchRequest], state: State, caller: CallerDep) -> Response[dict[str, str]]:
    """Launches and schedules; answers the run and its office's address."""
    run_id = await anyio.to_thread.run_sync(_launch, state, caller, data)
    return Response({"run_id": run_id, "location": f"/runs/{run_id}"}, status_code=201)
