"""``squadops workspace health`` reads the controller's loop fields, not the status code."""

from __future__ import annotations

import pytest

from workers.cli import parser
from workers.portal_cli import healthy

CLEAN = {"last_reconcile_error": "", "last_reconcile": {"errored": 0, "stale_provisioning": 0,
                                                        "workspace_cleanup_errors": 0}}


@pytest.mark.parametrize(
    ("change", "ok"),
    [
        ({}, True),
        ({"last_reconcile_error": "OperationalError('gone')"}, False),
        ({"last_reconcile": {**CLEAN["last_reconcile"], "errored": 1}}, False),
        ({"last_reconcile": {**CLEAN["last_reconcile"], "stale_provisioning": 2}}, False),
        ({"last_reconcile": {**CLEAN["last_reconcile"], "workspace_cleanup_errors": 1}}, False),
    ],
)
def test_health_is_the_loop_fields(change: dict, ok: bool) -> None:
    assert healthy({**CLEAN, **change}) is ok


def test_the_commands_parse() -> None:
    args = parser().parse_args(["workspace", "launch", "--project", "acme", "--as", "a@x.io", "--groups", ""])
    assert (args.project, args.email, args.groups) == ("acme", "a@x.io", "")
    args = parser().parse_args(["portal", "check", "project:acme", "--relation", "owner"])
    assert (args.object, args.relation, args.email) == ("project:acme", "owner", "operator@squadops.local")
