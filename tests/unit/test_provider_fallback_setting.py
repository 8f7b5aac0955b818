"""``SQUADOPS_LOCAL_PROVIDER_FALLBACK``: a provider whose CLI runs here, or nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.builders import build_plane
from workers.planes.local import LocalPlane
from workers.settings import SettingsError, load_settings


def test_the_fallback_is_a_provider_the_local_plane_can_run_and_reaches_the_plane(tmp_path: Path) -> None:
    assert load_settings({}).local_provider_fallback == ""
    settings = load_settings({"SQUADOPS_EXECUTION_PLANE": "local", "SQUADOPS_DATA_DIR": str(tmp_path),
                              "SQUADOPS_LOCAL_PROVIDER_FALLBACK": "claude-code-cli"})
    plane = build_plane(settings, event_store=None, token_key="k")  # type: ignore[arg-type]
    assert isinstance(plane, LocalPlane) and plane.config.provider_fallback == "claude-code-cli"
    assert load_settings({"SQUADOPS_LOCAL_PROVIDER_FALLBACK": "codex"}).local_provider_fallback == "codex"
    for bad in ("antigravity", "claude", "gpt-5"):  # no CLI of the plane runs these
        with pytest.raises(SettingsError, match="SQUADOPS_LOCAL_PROVIDER_FALLBACK"):
            load_settings({"SQUADOPS_LOCAL_PROVIDER_FALLBACK": bad})
