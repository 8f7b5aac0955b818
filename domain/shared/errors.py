"""Domain errors; the API maps each kind to one HTTP status (C3)."""

from __future__ import annotations


class DomainError(Exception):
    """Base of every error the domain raises on purpose."""

    code = "domain_error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class NotFound(DomainError):
    code = "not_found"


class Conflict(DomainError):
    """The command does not fit the aggregate's current state (409)."""

    code = "conflict"


class Invalid(DomainError):
    """The command is well-formed but its values are not acceptable (400)."""

    code = "invalid"


class Forbidden(DomainError):
    code = "forbidden"


class Unavailable(DomainError):
    code = "unavailable"


def project_not_found(slug: str) -> NotFound:
    return NotFound(f"No project with slug {slug!r} in this tenant.", code="project_not_found")


def template_not_found(template_id: str) -> NotFound:
    return NotFound(f"No template with id {template_id!r}.", code="template_not_found")


def run_not_found(run_id: str) -> NotFound:
    return NotFound(f"No run with id {run_id!r} in this tenant.", code="run_not_found")


def session_not_found(session_id: str) -> NotFound:
    return NotFound(
        f"No session with id {session_id!r} in this run.", code="session_not_found"
    )
