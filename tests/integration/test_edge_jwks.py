"""Edge assertions signed with RS256/ES256, keys from a JWKS file or URL (SQUADOPS_EDGE_JWKS).

Real keys (generated with ``cryptography``), a real JWK Set file, and a JWKS URL served by a
real HTTP server on a local port. Only the configured algorithms verify; an unknown ``kid``
is a 401; a JWKS URL that cannot be reached is a 503 with the C3 body.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from litestar.testing import TestClient

from api.app import create_app
from api.auth import EdgeJwt, sign_assertion, verify_assertion
from api.errors import ApiError
from api.jwks import EdgeKeys
from tests.conftest import ADMIN, settings_for
from tests.stub_http import StubServer
from workers.bootstrap import build
from workers.json_http import JsonHandler
from workers.settings import SettingsError, load_settings

SECRET = "edge-test-key-0123456789abcdef-0123456789"
TEMPLATES = "/v1/admin/studio/templates"
EMAIL = ADMIN["x-edge-claim-email"]
GROUPS = [ADMIN["x-edge-claim-groups"]]

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
OTHER_RSA = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def public_jwk(private: Any, kid: str, alg: str) -> dict[str, Any]:
    algorithm = jwt.get_algorithm_by_name(alg)
    jwk = json.loads(algorithm.to_jwk(private.public_key()))
    return {**jwk, "kid": kid, "use": "sig", "alg": alg}


def jwks(*keys: dict[str, Any]) -> str:
    return json.dumps({"keys": list(keys)})


KEYS = jwks(public_jwk(RSA_KEY, "rsa-1", "RS256"), public_jwk(EC_KEY, "ec-1", "ES256"))


def claims(**changes: Any) -> dict[str, Any]:
    now = int(time.time())
    return {"email": EMAIL, "groups": GROUPS, "exp": now + 600, "iat": now - 5, **changes}


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def refused(token: str, edge: EdgeJwt, status: int = 401) -> ApiError:
    with pytest.raises(ApiError) as caught:
        verify_assertion(token, edge)
    assert caught.value.status == status, caught.value.detail
    return caught.value


@pytest.fixture(scope="module")
def jwks_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("jwks") / "edge.jwks.json"
    path.write_text(KEYS)
    return path


class _Server:
    """A JWKS endpoint on a local port (its URL once served), counting how often it is asked."""

    def __init__(self, body: str) -> None:
        self.body = body
        self.hits = 0
        self.url = ""

    def handler(self) -> type[JsonHandler]:
        server = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                server.hits += 1
                self.send_json(200, server.body.encode())

        return Handler


@pytest.fixture(scope="module")
def jwks_server() -> Iterator[_Server]:
    server = _Server(KEYS)
    with StubServer(server.handler()) as stub:
        server.url = f"{stub.url}/.well-known/jwks.json"
        yield server


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/jwks.json"  # nothing listens there any more


# -- the rules, straight on verify_assertion ------------------------------------------------


def test_rs256_and_es256_verify_with_the_key_their_kid_names(jwks_file: Path) -> None:
    edge = EdgeJwt(jwks=EdgeKeys(str(jwks_file)))
    assert edge.accepted == ("RS256", "ES256")
    assert verify_assertion(sign_assertion(claims(), RSA_KEY, "RS256", "rsa-1"), edge)["email"] == EMAIL
    assert verify_assertion(sign_assertion(claims(), EC_KEY, "ES256", "ec-1"), edge)["email"] == EMAIL


def test_unknown_or_missing_kid_and_a_foreign_key_are_401(jwks_file: Path) -> None:
    edge = EdgeJwt(jwks=EdgeKeys(str(jwks_file)))
    assert "rsa-9" in refused(sign_assertion(claims(), RSA_KEY, "RS256", "rsa-9"), edge).detail
    refused(sign_assertion(claims(), RSA_KEY, "RS256"), edge)  # no kid at all
    refused(sign_assertion(claims(), OTHER_RSA, "RS256", "rsa-1"), edge)  # same kid, another key
    # A kid naming the EC key on an RS256 token (and the reverse) does not verify.
    refused(sign_assertion(claims(), RSA_KEY, "RS256", "ec-1"), edge)
    refused(sign_assertion(claims(), EC_KEY, "ES256", "rsa-1"), edge)


def test_only_configured_algorithms_are_accepted(jwks_file: Path) -> None:
    only_rs = EdgeJwt(jwks=EdgeKeys(str(jwks_file)), algorithms=("RS256",))
    assert verify_assertion(sign_assertion(claims(), RSA_KEY, "RS256", "rsa-1"), only_rs)
    assert "ES256" in refused(sign_assertion(claims(), EC_KEY, "ES256", "ec-1"), only_rs).detail
    refused(sign_assertion(claims(), RSA_KEY, "RS512", "rsa-1"), only_rs)
    refused(sign_assertion(claims(), RSA_KEY, "PS256", "rsa-1"), only_rs)
    # alg none, with or without a signature.
    body = b64(json.dumps(claims()).encode())
    for alg in ("none", "None", "NONE"):
        head = b64(json.dumps({"alg": alg, "typ": "JWT", "kid": "rsa-1"}).encode())
        refused(f"{head}.{body}.", only_rs)
        refused(f"{head}.{body}.{b64(b'x' * 32)}", only_rs)
    # No shared secret configured: HS256 is refused whatever it is signed with.
    refused(sign_assertion(claims(), SECRET, "HS256", "rsa-1"), only_rs)


def test_a_public_key_used_as_an_hmac_secret_is_refused(jwks_file: Path) -> None:
    """Key confusion: an HS256 token whose secret is the RSA public key (PEM or JWK)."""
    pem = RSA_KEY.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    head = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "rsa-1"}).encode())
    body = b64(json.dumps(claims()).encode())
    forged = f"{head}.{body}.{b64(hmac.new(pem, f'{head}.{body}'.encode(), hashlib.sha256).digest())}"
    jwks_only = EdgeJwt(jwks=EdgeKeys(str(jwks_file)))
    both = EdgeJwt(key=SECRET, jwks=EdgeKeys(str(jwks_file)))
    assert both.accepted == ("HS256", "RS256", "ES256")
    refused(forged, jwks_only)
    refused(forged, both)
    # Both configured: HS256 still verifies with the shared secret, RS256 with the JWKS.
    assert verify_assertion(sign_assertion(claims(), SECRET), both)
    assert verify_assertion(sign_assertion(claims(), RSA_KEY, "RS256", "rsa-1"), both)


def test_a_rotated_file_is_read_again_for_a_new_kid(tmp_path: Path) -> None:
    path = tmp_path / "edge.jwks.json"
    path.write_text(jwks(public_jwk(RSA_KEY, "rsa-1", "RS256")))
    edge = EdgeJwt(jwks=EdgeKeys(str(path)))
    token = sign_assertion(claims(), OTHER_RSA, "RS256", "rsa-2")
    refused(token, edge)
    path.write_text(jwks(public_jwk(RSA_KEY, "rsa-1", "RS256"), public_jwk(OTHER_RSA, "rsa-2", "RS256")))
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 1_000_000))
    assert verify_assertion(token, edge)["email"] == EMAIL


def test_a_jwks_url_is_fetched_once_and_cached(jwks_server: _Server) -> None:
    edge = EdgeJwt(jwks=EdgeKeys(jwks_server.url))
    before = jwks_server.hits
    for _ in range(3):
        assert verify_assertion(sign_assertion(claims(), EC_KEY, "ES256", "ec-1"), edge)
        assert verify_assertion(sign_assertion(claims(), RSA_KEY, "RS256", "rsa-1"), edge)
    assert jwks_server.hits == before + 1
    refused(sign_assertion(claims(), RSA_KEY, "RS256", "nope"), edge)


def test_an_unreachable_jwks_url_is_a_503() -> None:
    edge = EdgeJwt(jwks=EdgeKeys(closed_port_url(), timeout=1.0))
    error = refused(sign_assertion(claims(), RSA_KEY, "RS256", "rsa-1"), edge, status=503)
    assert error.code == "edge_jwks_unavailable"


def test_the_settings_name_the_jwks_and_refuse_an_algorithm_without_its_key(jwks_file: Path) -> None:
    settings = load_settings({"SQUADOPS_EDGE_JWKS": str(jwks_file), "SQUADOPS_EDGE_JWT_ALGORITHMS": "RS256, ES256"})
    assert settings.edge_jwks == str(jwks_file) and settings.edge_jwt_algorithms == ("RS256", "ES256")
    with pytest.raises(SettingsError, match="needs SQUADOPS_EDGE_JWKS"):
        load_settings({"SQUADOPS_EDGE_JWT_ALGORITHMS": "RS256"})
    with pytest.raises(SettingsError, match="needs SQUADOPS_EDGE_JWT_KEY"):
        load_settings({"SQUADOPS_EDGE_JWKS": str(jwks_file), "SQUADOPS_EDGE_JWT_ALGORITHMS": "HS256"})
    with pytest.raises(SettingsError, match="not one of"):
        load_settings({"SQUADOPS_EDGE_JWKS": str(jwks_file), "SQUADOPS_EDGE_JWT_ALGORITHMS": "none"})


# -- over HTTP ------------------------------------------------------------------------------


def serve(tmp_path: Path, **edge: Any) -> Iterator[TestClient]:
    container = build(settings_for(f"sqlite:///{tmp_path / 'squadops.db'}", **edge))
    with TestClient(create_app(container, workers=()), raise_server_exceptions=False) as client:
        client.headers.update(ADMIN)
        yield client
    container.close()


@pytest.fixture(scope="module")
def http_file(tmp_path_factory: pytest.TempPathFactory, jwks_file: Path) -> Iterator[TestClient]:
    yield from serve(tmp_path_factory.mktemp("jwks-file"), edge_jwks=str(jwks_file))


def answer(client: TestClient, token: str) -> Any:
    return client.get(TEMPLATES, headers={"x-edge-jwt-assertion": token})


def assert_c3(response: Any, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.json() == {"detail": response.json()["detail"], "code": code}


def test_http_with_a_jwks_file(http_file: TestClient) -> None:
    assert answer(http_file, sign_assertion(claims(), RSA_KEY, "RS256", "rsa-1")).status_code == 200
    assert answer(http_file, sign_assertion(claims(), EC_KEY, "ES256", "ec-1")).status_code == 200
    assert_c3(answer(http_file, sign_assertion(claims(), RSA_KEY, "RS256", "rsa-7")), 401, "edge_assertion_invalid")
    assert_c3(answer(http_file, sign_assertion(claims(), SECRET, "HS256")), 401, "edge_assertion_invalid")
    assert_c3(http_file.get(TEMPLATES), 401, "edge_assertion_missing")
    mismatch = sign_assertion(claims(email="someone@example.com"), RSA_KEY, "RS256", "rsa-1")
    assert_c3(answer(http_file, mismatch), 401, "edge_assertion_mismatch")


def test_http_with_a_jwks_url(tmp_path: Path, jwks_server: _Server) -> None:
    for client in serve(tmp_path, edge_jwks=jwks_server.url):
        assert answer(client, sign_assertion(claims(), EC_KEY, "ES256", "ec-1")).status_code == 200
        assert answer(client, sign_assertion(claims(), RSA_KEY, "RS256", "rsa-1")).status_code == 200
        assert_c3(answer(client, sign_assertion(claims(), EC_KEY, "ES256", "ec-2")), 401, "edge_assertion_invalid")


def test_http_with_an_unreachable_jwks_url_is_a_503(tmp_path: Path) -> None:
    for client in serve(tmp_path, edge_jwks=closed_port_url()):
        assert_c3(answer(client, sign_assertion(claims(), RSA_KEY, "RS256", "rsa-1")), 503, "edge_jwks_unavailable")
        # The refusals that need no key still come first.
        assert_c3(answer(client, sign_assertion(claims(), SECRET, "HS256")), 401, "edge_assertion_invalid")
        with client.websocket_connect(
            "/control-plane/studio/live/ws?topic=portal_live_events:tenant:default:run:r1",
            headers={**ADMIN, "x-edge-jwt-assertion": sign_assertion(claims(), RSA_KEY, "RS256", "rsa-1")},
        ) as ws:
            assert ws.receive_json()["code"] == "edge_jwks_unavailable"
