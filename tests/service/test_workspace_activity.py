"""Use keeps a workspace from the idle auto-stop (injected clock): model traffic through the
meter marks a ready workspace used, at most once a minute; the idle timeout counts from the
last use. Meter tokens name the workspace's tenant and scope, and nothing else verifies."""

from __future__ import annotations

import pytest

from domain.workspaces.metering import MeterTokens, Unauthorized
from tests.service.test_workspace_controller import controller, launch, ready, world  # noqa: F401 (fixture)
from workers.adapters.local_cluster import LocalCluster


def test_metered_use_postpones_the_idle_auto_stop(world) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    _, commands, clock, root = world
    ctl = controller(world, LocalCluster(root))
    wid = ready(world, ctl, commands)
    scope = commands.store.get_or_none(wid).workspace_scope
    clock.advance(1500)
    assert commands.mark_active("default", scope) is True
    assert commands.mark_active("default", scope) is False  # once a minute at most
    assert commands.mark_active("other-tenant", scope) is False  # not this tenant's workspace
    clock.advance(400)  # 1900 s after ready, 400 s after the last use
    ctl.reconcile_once()
    assert commands.store.get_or_none(wid).status == "ready"
    clock.advance(1401)  # now idle past the 30 min timeout
    assert ctl.reconcile_once().stopped == 1
    ws = commands.store.get_or_none(wid)
    assert ws.status == "suspended"
    assert commands.mark_active("default", scope) is False  # a stopped workspace is not revived by use
    assert commands.store.get_or_none(wid).version == ws.version


def test_a_pending_workspace_is_not_marked_used(world) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    _, commands, clock, _ = world
    wid = launch(commands)
    clock.advance(120)
    assert commands.mark_active("default", commands.store.get_or_none(wid).workspace_scope) is False


@pytest.mark.parametrize("tenant", ["default", "acme.eu"])
def test_meter_tokens_bind_tenant_and_scope(tenant: str) -> None:
    tokens = MeterTokens("k")
    token = tokens.issue("dev", "acme-dev-0123456789", tenant)
    assert tokens.binding(token, "dev") == (tenant, "acme-dev-0123456789")
    assert tokens.verify(token, "dev") == "acme-dev-0123456789"
    for bad in (token + "0", token.replace("dev.", "eve.", 1), "", "a.b", "dev.x.zz.00"):
        with pytest.raises(Unauthorized):
            tokens.binding(bad, "dev")
    with pytest.raises(Unauthorized):
        tokens.binding(token, "eve")  # another employee's meter
    with pytest.raises(Unauthorized):
        MeterTokens("other-key").binding(token, "dev")
    if tenant != "default":  # the tenant is signed: it cannot be swapped
        swapped = token.replace(b"acme.eu".hex(), b"default".hex())
        with pytest.raises(Unauthorized):
            tokens.binding(swapped, "dev")
