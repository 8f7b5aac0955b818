"""Issue 22, findings 2 (secrets from files), 8, 10 (settings, meter, return_to): each
test is the attacker's request (or the operator's mistake) against the real HTTP app."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from litestar.testing import TestClient

from api.app import create_app
from api.auth import edge_jwt, sign_assertion
from tests.conftest import ADMIN, settings_for
from workers.bootstrap import Container, build
from workers.cli import main
from workers.settings import SECRET_SETTINGS, Settings, SettingsError, load_settings

KEY = "edge-test-key-0123456789abcdef-0123456789"
TEMPLATES = "/v1/admin/studio/templates"
SUPER = "/org/platform/roles/super_admin"


def assertion(email: str, key: str = KEY, lifetime: int = 600, **extra: Any) -> str:
    now = int(time.time())
    return sign_assertion({"email": email, "groups": [SUPER], "exp": now + lifetime, **extra}, key)


def c3(answer: httpx.Response, status: int, code: str) -> None:
    assert answer.status_code == status, answer.text
    assert answer.json() == {"detail": answer.json()["detail"], "code": code} and answer.json()["detail"]


@pytest.fixture
def jwt_app(tmp_path: Path) -> Iterator[TestClient]:
    container = build(settings_for(f"sqlite:///{tmp_path / 'squadops.db'}", edge_jwt_key=KEY))
    with TestClient(create_app(container, workers=()), raise_server_exceptions=False) as http:
        yield http
    container.close()


def test_a_kelvin_sign_assertion_does_not_become_someone_else(jwt_app: TestClient) -> None:
    kelvin = "\u212aate@corp.com"  # 'K' KELVIN SIGN: NFKC and case folding make it kate@corp.com
    as_kate = {"x-edge-claim-email": "kate@corp.com", "x-edge-claim-groups": SUPER}
    c3(jwt_app.get(TEMPLATES, headers={**as_kate, "x-edge-jwt-assertion": assertion(kelvin)}), 401, "edge_assertion_mismatch")
    fullwidth = "\uff4bate@corp.com"  # FULLWIDTH LATIN SMALL LETTER K: the same under NFKC
    c3(jwt_app.get(TEMPLATES, headers={**as_kate, "x-edge-jwt-assertion": assertion(fullwidth)}), 401, "edge_assertion_mismatch")
    # Case alone is no other identity: the edge may spell the header as the user typed it.
    ok = jwt_app.get(TEMPLATES, headers={**as_kate, "x-edge-claim-email": "Kate@Corp.com", "x-edge-jwt-assertion": assertion("kate@corp.com")})
    assert ok.status_code == 200, ok.text


def test_a_long_lived_assertion_is_refused(jwt_app: TestClient) -> None:
    headers = {"x-edge-claim-email": "kate@corp.com", "x-edge-claim-groups": SUPER}
    stolen = assertion("kate@corp.com", lifetime=30 * 24 * 3600)  # valid for a month: a stolen token lasts
    c3(jwt_app.get(TEMPLATES, headers={**headers, "x-edge-jwt-assertion": stolen}), 401, "edge_assertion_invalid")
    old = assertion("kate@corp.com", lifetime=600, iat=int(time.time()) - 2 * 24 * 3600)  # exp - iat: two days
    c3(jwt_app.get(TEMPLATES, headers={**headers, "x-edge-jwt-assertion": old}), 401, "edge_assertion_invalid")
    assert jwt_app.get(TEMPLATES, headers={**headers, "x-edge-jwt-assertion": assertion("kate@corp.com", lifetime=23 * 3600)}).status_code == 200


def test_short_keys_are_refused_at_startup() -> None:
    for name in ("EDGE_JWT_KEY", "MCP_TOKEN_KEY", "MODEL_PROXY_CLIENT_KEY"):
        with pytest.raises(SettingsError, match=f"SQUADOPS_{name} must be at least 32 bytes"):
            load_settings({f"SQUADOPS_{name}": "k"})
        assert getattr(load_settings({f"SQUADOPS_{name}": "k" * 32}), name.lower()) == "k" * 32
    with pytest.raises(ValueError, match="at least 32 bytes"):
        edge_jwt(Settings(edge_jwt_key="k"))  # the app itself refuses one, however it was configured
    with pytest.raises(SettingsError, match="MAX_LIFETIME"):
        load_settings({"SQUADOPS_EDGE_JWT_MAX_LIFETIME_SECONDS": "0"})
    assert load_settings({}).edge_jwt_max_lifetime_seconds == 24 * 3600


def test_production_off_loopback_without_a_key_does_not_start(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SettingsError, match="SQUADOPS_ENV=production on 0.0.0.0"):
        load_settings({"SQUADOPS_ENV": "production", "SQUADOPS_HOST": "0.0.0.0"})
    assert load_settings({"SQUADOPS_ENV": "production", "SQUADOPS_HOST": "127.0.0.1"}).env == "production"
    assert load_settings({"SQUADOPS_ENV": "production", "SQUADOPS_HOST": "0.0.0.0", "SQUADOPS_EDGE_JWT_KEY": KEY}).host == "0.0.0.0"
    # `serve --host` moves it off loopback after the settings were read: refused too, before anything starts.
    for name in [n for n in list(__import__("os").environ) if n.startswith("SQUADOPS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("SQUADOPS_ENV", "production")
    assert main(["serve", "--host", "0.0.0.0", "--port", "1"]) == 2
    assert "needs SQUADOPS_EDGE_JWT_KEY or SQUADOPS_EDGE_JWKS" in capsys.readouterr().err


def test_secrets_are_read_from_files(tmp_path: Path) -> None:
    values = {
        "database_url": f"sqlite:///{tmp_path / 'from-file.db'}",
        "edge_jwt_key": KEY,
        "mcp_token_key": "m" * 40,
        "api_keys": "automation-key-0123456789abcdef-0123",
        "model_proxy_token": "upstream-token",
        "model_proxy_client_key": "c" * 40,
        "upstream_anthropic_key": "sk-ant-from-file",
        "upstream_openai_key": "sk-openai-from-file",
        "error_tracking_token": "sentry-token",
        "novu_api_key": "novu-key",
    }
    assert set(values) == set(SECRET_SETTINGS)
    environ = {}
    for name, value in values.items():
        path = tmp_path / name
        path.write_text(value + "\n")  # as `echo` and most secret stores write them
        environ[f"SQUADOPS_{name.upper()}_FILE"] = str(path)
    settings = load_settings(environ)
    assert settings.api_keys == ("automation-key-0123456789abcdef-0123",)
    for name, value in values.items():
        if name != "api_keys":
            assert getattr(settings, name) == value, name
    with pytest.raises(SettingsError, match="SQUADOPS_EDGE_JWT_KEY and SQUADOPS_EDGE_JWT_KEY_FILE are both set"):
        load_settings({**environ, "SQUADOPS_EDGE_JWT_KEY": KEY})
    with pytest.raises(SettingsError, match="SQUADOPS_EDGE_JWT_KEY_FILE cannot be read"):
        load_settings({"SQUADOPS_EDGE_JWT_KEY_FILE": str(tmp_path / "missing")})
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(SettingsError, match="empty file"):  # never a silent fall back to trusted headers
        load_settings({"SQUADOPS_EDGE_JWT_KEY_FILE": str(tmp_path / "empty")})
    with pytest.raises(SettingsError, match="NOVU_SECRET_KEY"):
        load_settings({"SQUADOPS_NOVU_SECRET_KEY": "a", "SQUADOPS_NOVU_SECRET_KEY_FILE": str(tmp_path / "novu_api_key")})
    # The service verifies with the key from the file, and only with it.
    container = build(settings.replace(data_dir=str(tmp_path / "data"), execution_plane="simulator"))
    try:
        with TestClient(create_app(container, workers=()), raise_server_exceptions=False) as http:
            headers = {"x-edge-claim-email": "kate@corp.com", "x-edge-claim-groups": SUPER}
            assert http.get(TEMPLATES, headers={**headers, "x-edge-jwt-assertion": assertion("kate@corp.com")}).status_code == 200
            forged = assertion("kate@corp.com", key="another-key-0123456789abcdef-0123456789")
            c3(http.get(TEMPLATES, headers={**headers, "x-edge-jwt-assertion": forged}), 401, "edge_assertion_invalid")
            c3(http.get(TEMPLATES, headers=headers), 401, "edge_assertion_missing")
    finally:
        container.close()


def test_return_to_cannot_leave_the_portal(tmp_path: Path) -> None:
    container = build(settings_for(f"sqlite:///{tmp_path / 'squadops.db'}"))
    try:
        with TestClient(create_app(container, workers=("projector",)), raise_server_exceptions=False) as http:
            for target in ("/\\evil.example", "/\\/evil.example", "/\t/evil.example", "//evil.example", "https://evil.example/", "/a\n"):
                answer = http.get("/v1/portal/workspace", params={"return_to": target}, headers=ADMIN)
                assert answer.status_code == 422, (target, answer.text)
                assert answer.json()["detail"][0]["loc"] == ["query", "return_to"]
            ok = http.get("/v1/portal/workspace", params={"return_to": "/v1/portal/impact?x=1"}, headers=ADMIN)
            assert ok.status_code == 200 and ok.json()["return_to"] == "/v1/portal/impact?x=1"
    finally:
        container.close()


def meter_world(tmp_path: Path) -> tuple[TestClient, Container]:
    container = build(settings_for(f"sqlite:///{tmp_path / 'squadops.db'}", model_proxy_client_key="c" * 40))
    return TestClient(create_app(container, workers=("projector",))), container


def test_the_meter_keeps_look_alike_employees_apart(tmp_path: Path) -> None:
    http, container = meter_world(tmp_path)
    project = {
        "project_key": "acme",
        "participants": [
            {"subject_key": "carol@corp.com", "project_role": "contributor"},
            {"subject_key": "carol@evil.com", "project_role": "contributor"},
        ],
    }
    try:
        with http:
            assert http.post("/v1/project-factory/projects", json=project, headers=ADMIN).status_code == 201
            spaces = {}
            for email in ("carol@corp.com", "carol@evil.com"):
                answer = http.get("/v1/portal/launches/dev_workspace", params={"project_slug": "acme"},
                                  headers={"x-edge-claim-email": email})
                assert answer.status_code == 200, answer.text
                spaces[email] = answer.json()
            evil = spaces["carol@evil.com"]
            obs = evil["reconnect_material"]["usage_observability"]
            assert obs["employee_slug"] == spaces["carol@corp.com"]["reconnect_material"]["usage_observability"]["employee_slug"]
            token = container.meter_tokens.issue(obs["employee_slug"], evil["workspace_scope"])
            call = {"model": "m", "messages": [{"role": "user", "content": "spend carol's budget"}]}
            for _ in range(3):
                answer = http.post(f"{obs['meter_path']}/chat/completions", json=call, headers={"authorization": f"Bearer {token}"})
                assert answer.status_code == 200, answer.text
            metrics = http.get("/metrics").text
            requests = obs["metric_names"]["requests"]
            assert f'{requests}{{agent="",employee="carol@evil.com",run=""}} 3.0' in metrics
            assert 'employee="carol@corp.com"' not in metrics and 'employee="carol"' not in metrics
    finally:
        container.close()


def test_a_state_changing_get_is_refused_from_another_site(tmp_path: Path) -> None:
    http, container = meter_world(tmp_path)
    project = {"project_key": "acme", "participants": [{"subject_key": "carol@corp.com", "project_role": "contributor"}]}
    try:
        with http:
            assert http.post("/v1/project-factory/projects", json=project, headers=ADMIN).status_code == 201
            carol = {"x-edge-claim-email": "carol@corp.com"}
            # <img src="https://squadops/v1/portal/launches/dev_workspace?project_slug=acme"> on another site.
            c3(http.get("/v1/portal/launches/dev_workspace", params={"project_slug": "acme"},
                        headers={**carol, "sec-fetch-site": "cross-site"}), 403, "origin_not_allowed")
            c3(http.get("/v1/portal/launches/dev_workspace", params={"project_slug": "acme"},
                        headers={**carol, "origin": "http://evil.example"}), 403, "origin_not_allowed")
            assert http.get("/v1/portal/launches/dev_workspace/workspaces", headers=carol).json()["items"] == []
            assert http.get("/v1/portal/launches/dev_workspace", params={"project_slug": "acme"},
                            headers={**carol, "sec-fetch-site": "same-origin"}).status_code == 200
    finally:
        container.close()
