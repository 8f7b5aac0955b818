"""The edge assertion in JWT mode (C2): only a well-formed, current, signed token counts."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

from api.app import create_app
from api.auth import sign_assertion
from tests.conftest import ADMIN, settings_for
from workers.bootstrap import build

KEY = "edge-test-key-0123456789abcdef-0123456789"
AUDIENCE = "squadops"
ISSUER = "https://edge.example.com"
TEMPLATES = "/v1/admin/studio/templates"
EMAIL = ADMIN["x-edge-claim-email"]
GROUPS = [ADMIN["x-edge-claim-groups"]]


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def forge(header: Any, claims: Any, key: str = KEY, digest: Any = hashlib.sha256) -> str:
    """A token signed over any header and payload JSON, as a hostile edge could send."""
    head = b64(json.dumps(header).encode())
    body = b64(json.dumps(claims).encode())
    signature = hmac.new(key.encode(), f"{head}.{body}".encode(), digest).digest()
    return f"{head}.{body}.{b64(signature)}"


def claims(**changes: Any) -> dict[str, Any]:
    now = int(time.time())
    base = {"email": EMAIL, "groups": GROUPS, "exp": now + 600, "iat": now - 5, "aud": AUDIENCE, "iss": ISSUER}
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def serve(tmp_path: Path, **edge: str) -> Iterator[TestClient]:
    container = build(settings_for(f"sqlite:///{tmp_path / 'squadops.db'}", edge_jwt_key=KEY, **edge))
    with TestClient(create_app(container, workers=()), raise_server_exceptions=False) as client:
        client.headers.update(ADMIN)
        yield client
    container.close()


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """aud and iss configured."""
    yield from serve(tmp_path_factory.mktemp("jwt"), edge_jwt_audience=AUDIENCE, edge_jwt_issuer=ISSUER)


@pytest.fixture(scope="module")
def http_plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """Only the key configured."""
    yield from serve(tmp_path_factory.mktemp("jwt-plain"))


def answer(client: TestClient, token: str) -> Any:
    return client.get(TEMPLATES, headers={"x-edge-jwt-assertion": token})


def assert_refused(response: Any, code: str = "edge_assertion_invalid") -> None:
    assert response.status_code == 401, response.text
    assert response.json() == {"detail": response.json()["detail"], "code": code}
    assert isinstance(response.json()["detail"], str) and response.json()["detail"]


def test_a_valid_assertion_is_accepted(http: TestClient, http_plain: TestClient) -> None:
    assert answer(http, sign_assertion(claims(), KEY)).status_code == 200
    # Groups may also come as one comma-separated string.
    assert answer(http, sign_assertion(claims(groups=",".join(GROUPS)), KEY)).status_code == 200
    # Without aud/iss configured, a token carrying none (or any) is not checked for them.
    assert answer(http_plain, sign_assertion(claims(aud=None, iss=None), KEY)).status_code == 200
    assert answer(http_plain, sign_assertion(claims(aud="other", iss="other"), KEY)).status_code == 200


@pytest.mark.parametrize(
    "header",
    [[1, 2], ["alg", "HS256"], "HS256", 7, None],
    ids=["array", "pair", "string", "number", "null"],
)
def test_a_header_that_is_not_a_json_object_is_a_401(http: TestClient, header: Any) -> None:
    assert_refused(answer(http, forge(header, claims())))


@pytest.mark.parametrize(
    "payload",
    [[1, 2], "claims", 7],
    ids=["array", "string", "number"],
)
def test_a_payload_that_is_not_a_json_object_is_a_401(http: TestClient, payload: Any) -> None:
    assert_refused(answer(http, forge({"alg": "HS256", "typ": "JWT"}, payload)))


@pytest.mark.parametrize(
    "changes",
    [
        {"exp": None},
        {"exp": str(int(time.time()) + 600)},
        {"exp": "soon"},
        {"nbf": True},
        {"nbf": int(time.time()) + 600},
        {"nbf": str(int(time.time()) - 600)},
        {"iat": int(time.time()) + 600},
        {"iat": "yesterday"},
        {"aud": "someone-else"},
        {"aud": None},
        {"iss": "https://evil.example.com"},
        {"iss": None},
        {"groups": 5},
        {"groups": {"admin": True}},
        {"groups": [GROUPS[0], 5]},
    ],
    ids=[
        "missing exp",
        "numeric string exp",
        "string exp",
        "boolean nbf",
        "future nbf",
        "string nbf",
        "future iat",
        "string iat",
        "wrong aud",
        "missing aud",
        "wrong iss",
        "missing iss",
        "number groups",
        "object groups",
        "mixed groups",
    ],
)
def test_a_claim_out_of_bounds_is_a_401(http: TestClient, changes: dict[str, Any]) -> None:
    assert_refused(answer(http, forge({"alg": "HS256", "typ": "JWT"}, claims(**changes))))


def test_an_expired_assertion_is_a_401(http: TestClient) -> None:
    assert_refused(answer(http, sign_assertion(claims(exp=int(time.time()) - 1), KEY)), "edge_assertion_expired")


def test_junk_around_the_segments_is_a_401(http: TestClient) -> None:
    token = sign_assertion(claims(), KEY)
    head, body, signature = token.split(".")
    # The last character of a 43-character segment carries 2 unused bits: flipping them
    # decodes to the same bytes, so a loose decoder accepts a second spelling.
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    twin = alphabet[alphabet.index(signature[-1]) ^ 1]
    for forged in [
        f"{token}!!",
        f"{token}=",
        f"{token}.",
        f"{token}.junk",
        f"{token} junk",
        f"{head}.{body}.{signature[:-1]}{twin}",
        f"{head}=.{body}.{signature}",
        f"{head}.{body}.{signature[:20]}*{signature[20:]}",
        f" {token}x",
        f"{head}.{body}",
        f"{head}.{body}.",
    ]:
        assert_refused(answer(http, forged))
    assert answer(http, token).status_code == 200


def test_only_the_configured_algorithm_is_accepted(http: TestClient) -> None:
    none_header = b64(json.dumps({"alg": "none", "typ": "JWT"}).encode())
    body = b64(json.dumps(claims()).encode())
    assert_refused(answer(http, f"{none_header}.{body}."))
    assert_refused(answer(http, f"{none_header}.{body}.{b64(b'x' * 32)}"))
    assert_refused(answer(http, forge({"alg": "None", "typ": "JWT"}, claims())))
    assert_refused(answer(http, forge({"alg": "HS512", "typ": "JWT"}, claims(), digest=hashlib.sha512)))
    assert_refused(answer(http, forge({"typ": "JWT"}, claims())))
    assert_refused(answer(http, forge({"alg": "HS256"}, claims(), key="another-key-0123456789abcdef-01234")))


def test_the_claims_still_must_match_the_headers(http: TestClient) -> None:
    token = sign_assertion(claims(email="someone@example.com"), KEY)
    response = answer(http, token)
    assert response.status_code == 401 and response.json()["code"] == "edge_assertion_mismatch"
    token = sign_assertion(claims(groups=[]), KEY)
    response = answer(http, token)
    assert response.status_code == 401 and response.json()["code"] == "edge_assertion_mismatch"


def test_the_websocket_refuses_a_malformed_assertion_with_4401(http: TestClient) -> None:
    token = forge([1, 2], claims())
    with http.websocket_connect(
        "/control-plane/studio/live/ws?topic=portal_live_events:tenant:default:run:r1",
        headers={**ADMIN, "x-edge-jwt-assertion": token},
    ) as socket:
        body = socket.receive_json()
        assert body["code"] == "edge_assertion_invalid"
