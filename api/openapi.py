"""The OpenAPI document, completed from per-route metadata (one place).

Litestar documents each operation's success answer and a generic 400 it never sends.
Every route declares instead, in its ``opt``, what it really answers:

    @post("/runs", opt=answers(401, 403, 404, 422, links={"GetRun": link("get_run", run_id=RUN_ID)}))

``documented_schema`` rewrites the generated document once: each declared status with
its C3 body (``ErrorBody``, or ``ValidationBody`` for 422), 503 ``database_unavailable``
on every operation (C19), 413 where a body is taken, the links that let a client (and
schemathesis' stateful tests) follow one answer to the next operation, and request
bodies whose rules a struct cannot state (control verbs).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from litestar import Litestar, Request
from litestar.handlers import HTTPRouteHandler
from litestar.openapi.plugins import JsonRenderPlugin
from litestar.routes import HTTPRoute

from api.browser import CHANGES_STATE
from api.rate_limit import COMMAND_METHODS

ANSWERS = "squadops_answers"
ERROR_BODY = "ErrorBody"
VALIDATION_BODY = "ValidationBody"
_STATE_KEY = "openapi_documented"

DESCRIPTIONS = {
    400: "The request is well-formed but its values are refused (C3).",
    401: "No edge email claim, or the edge assertion does not verify or match (C2).",
    403: "The principal may not do this (C2, C14).",
    404: "Something the request names does not exist in this tenant (C4).",
    409: "The request does not fit the current state.",
    413: "The request body is larger than the service accepts.",
    415: "A request body that is not declared `application/json`.",
    429: "Too many commands from this principal (`SQUADOPS_RATE_LIMIT_PER_MINUTE`); retry after `Retry-After`.",
    422: "A malformed body, query, path or header (C3 validation body).",
    503: "The database, broker or read models cannot answer now (C19); retry after `Retry-After`.",
}
# The error statuses most routes answer: a read of one resource, a command on one.
READ_ERRORS = (401, 403, 404, 422)
COMMAND_ERRORS = (401, 403, 404, 409, 422)

COMPONENTS: dict[str, dict[str, Any]] = {
    ERROR_BODY: {
        "type": "object",
        "description": "Every error but a validation error (C3).",
        "required": ["detail", "code"],
        "properties": {
            "detail": {"type": "string", "description": "One sentence for a person."},
            "code": {"type": "string", "pattern": "^[a-z0-9_]+$(?!\\n)", "description": "A snake_case code for programs."},
        },
        "additionalProperties": False,
    },
    VALIDATION_BODY: {
        "type": "object",
        "description": "A malformed request (C3, the spec's validation body).",
        "required": ["detail"],
        "properties": {
            "detail": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["loc", "msg", "type", "input", "ctx"],
                    "properties": {
                        "loc": {"type": "array", "items": {"type": ["string", "integer"]}},
                        "msg": {"type": "string"},
                        "type": {"type": "string"},
                        "input": {},
                        "ctx": {"type": "object"},
                    },
                },
            }
        },
        "additionalProperties": False,
    },
}

# A request body schema, given the generated components (e.g. to extend a struct's schema).
BodySchema = Callable[[Mapping[str, Any]], dict[str, Any]]


def link(operation: str, *, body: dict[str, Any] | None = None, **parameters: str) -> dict[str, Any]:
    """An OpenAPI link to the route handler named ``operation``; ``parameters`` are
    ``name=<runtime expression>``, ``body`` is merged into the target's request body."""
    return {"operation": operation, "parameters": parameters, "body": body}


def answers(
    *statuses: int,
    links: dict[str, dict[str, Any]] | None = None,
    body: tuple[str, BodySchema] | None = None,
    examples: dict[str, dict[str, Any]] | None = None,
    also: tuple[int, ...] = (),
    parameters: dict[str, dict[str, Any]] | None = None,
    one_of_query: tuple[str, tuple[str, ...]] | None = None,
) -> dict[str, Any]:
    """A route's ``opt``: the error statuses it answers (besides 503 and 413, added for
    all), the links from its success answer, a request body schema ``(name, build)``
    replacing the one generated from its struct, and request body ``examples`` (name to
    a body that works against the demo data, ``squadops serve --demo``).

    ``also``: more success statuses with the success answer's body (an idempotent replay's
    200 beside the 202). ``parameters``: name to what a parameter's rules add to what its
    annotation documents (``required``, ``schema`` keywords: rules the handler checks
    itself, with its own message). ``one_of_query=(name, fields)``: the query fields of
    which at least one is given, documented as one exploded object parameter ``name``."""
    unknown = set(statuses) - set(DESCRIPTIONS)
    if unknown:
        raise ValueError(f"no description for statuses {sorted(unknown)}")
    return {
        ANSWERS: {
            "statuses": tuple(sorted(set(statuses))),
            "links": links or {},
            "body": body,
            "examples": examples or {},
            "also": tuple(also),
            "parameters": parameters or {},
            "one_of_query": one_of_query,
        }
    }


def _refine_parameters(operation: dict[str, Any], meta: Mapping[str, Any]) -> None:
    parameters = operation.get("parameters", [])
    for parameter in parameters:
        extra = meta["parameters"].get(parameter.get("name"))
        if extra:
            parameter.update({k: v for k, v in extra.items() if k != "schema"})
            parameter["schema"] = {**parameter.get("schema", {}), **extra.get("schema", {})}
    if meta["one_of_query"] is not None:
        name, fields = meta["one_of_query"]
        grouped = [p for p in parameters if p.get("in") == "query" and p.get("name") in fields]
        properties = {p["name"]: {**p.get("schema", {}), "minLength": 1} for p in grouped}
        operation["parameters"] = [p for p in parameters if p not in grouped] + [
            {
                "name": name,
                "in": "query",
                "required": True,
                "style": "form",
                "explode": True,
                "description": f"at least one of {', '.join(fields)}",
                "schema": {
                    "type": "object",
                    "properties": properties,
                    "minProperties": 1,
                    "additionalProperties": False,
                },
            }
        ]


def refined_body(component: str, **properties: dict[str, Any]) -> tuple[str, BodySchema]:
    """``answers(body=...)`` for a struct's generated schema with ``properties`` refined:
    what the struct's constraints say that the generated schema drops (nested items,
    keys), or a rule the handler checks itself (an enum)."""

    def build(components: Mapping[str, Any]) -> dict[str, Any]:
        schema = copy.deepcopy(components[component])
        for name, extra in properties.items():
            schema["properties"][name] = {**schema["properties"].get(name, {}), **extra}
        return schema

    return component, build


def _error_response(status: int) -> dict[str, Any]:
    body = VALIDATION_BODY if status == 422 else ERROR_BODY
    response: dict[str, Any] = {
        "description": DESCRIPTIONS[status],
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{body}"}}},
    }
    if status in (429, 503):
        response["headers"] = {"Retry-After": {"schema": {"type": "integer", "minimum": 0}}}
    return response


def _handlers(app: Litestar) -> list[tuple[str, str, HTTPRouteHandler]]:
    """``(path, method, handler)`` of every documented HTTP operation."""
    found = []
    for route in app.routes:
        if not isinstance(route, HTTPRoute):
            continue
        for handler in route.route_handlers:
            if not handler.resolve_include_in_schema():
                continue
            for method in sorted(handler.http_methods):
                found.append((route.path_format or "/", method.lower(), handler))
    return found


def _link_object(target: dict[str, Any], operation_ids: Mapping[str, str]) -> dict[str, Any]:
    if target["operation"] not in operation_ids:
        raise ValueError(f"a link names {target['operation']!r}, which is not a documented route handler")
    out: dict[str, Any] = {"operationId": operation_ids[target["operation"]]}
    if target["parameters"]:
        out["parameters"] = dict(target["parameters"])
    if target["body"] is not None:
        out["requestBody"] = target["body"]
    return out


def _not_nullable(parameter: dict[str, Any]) -> None:
    """A parameter is absent or a string on the wire, never null: Litestar documents an
    optional one as ``oneOf: [<type>, null]``, which clients would send as ``"null"``."""
    schema = parameter.get("schema", {})
    branches = schema.get("oneOf")
    if isinstance(branches, list) and {"type": "null"} in branches and len(branches) == 2:
        rest = {k: v for k, v in schema.items() if k != "oneOf"}
        parameter["schema"] = {**next(b for b in branches if b != {"type": "null"}), **rest}


def document(schema: dict[str, Any], app: Litestar) -> None:
    """Rewrites the generated document ``schema`` in place from the routes' ``opt``."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components.update(copy.deepcopy(COMPONENTS))
    operations = []
    operation_ids: dict[str, str] = {}
    for path, method, handler in _handlers(app):
        operation = schema["paths"][path][method]
        operations.append((operation, handler))
        operation_ids[handler.handler_name] = operation["operationId"]
    for operation, handler in operations:
        meta = handler.opt.get(ANSWERS)
        for parameter in operation.get("parameters", []):
            _not_nullable(parameter)
        responses = operation.setdefault("responses", {})
        # Litestar's generic 4xx bodies are not what the service sends (C3).
        for status in [s for s in responses if s.startswith("4")]:
            del responses[status]
        parameters = operation.get("parameters", [])
        statuses = set(meta["statuses"]) if meta else ({422} if parameters else set())
        if not meta and any(p.get("name", "").lower() == "x-edge-claim-email" for p in parameters):
            # A route behind the edge principal without its own list: who (401/403), what it
            # names (404) and the state it meets (409) can each refuse it.
            statuses |= {401, 403, 404, 409}
        statuses.add(503)
        if any(p.get("name", "").lower() == "x-squadops-min-position" for p in operation.get("parameters", [])):
            statuses |= {409, 422}  # a min-position beyond the log, or malformed (C19)
        if "requestBody" in operation:
            statuses |= {413, 415, 422}
        if handler.http_methods & COMMAND_METHODS:
            statuses |= {403, 429}  # another origin's page (api/browser.py); the rate limit
        elif handler.opt.get(CHANGES_STATE):
            statuses.add(403)
        for status in sorted(statuses):
            responses[str(status)] = _error_response(status)
        if not meta:
            continue
        success = next(s for s in sorted(responses) if s.startswith("2"))
        for status in meta["also"]:
            responses[str(status)] = copy.deepcopy(responses[success])
        _refine_parameters(operation, meta)
        if meta["links"]:
            responses[success]["links"] = {
                name: _link_object(target, operation_ids) for name, target in meta["links"].items()
            }
        if meta["body"] is not None:
            name, build = meta["body"]
            components[name] = build(components)
            operation["requestBody"]["content"]["application/json"]["schema"] = {"$ref": f"#/components/schemas/{name}"}
        if meta["examples"]:
            # Media type examples: what a reader copies, and what schemathesis mixes into
            # the bodies it generates (so a stateful sequence starts from a working answer).
            operation["requestBody"]["content"]["application/json"]["examples"] = {
                name: {"value": value} for name, value in meta["examples"].items()
            }


def documented_schema(app: Litestar) -> dict[str, Any]:
    """The app's OpenAPI document, completed on first use and kept in the app's state."""
    schema = app.state.get(_STATE_KEY)
    if schema is None:
        schema = app.openapi_schema.to_schema()
        document(schema, app)
        app.state[_STATE_KEY] = schema
    return schema


class DocumentedJsonRenderPlugin(JsonRenderPlugin):
    """Serves the completed document at ``/schema/openapi.json`` too."""

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        return super().render(request, documented_schema(request.app))
