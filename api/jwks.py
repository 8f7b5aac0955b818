"""The edge proxy's signing keys: a JWKS file or URL (``SQUADOPS_EDGE_JWKS``).

Edge proxies sign their assertion with a private RSA or EC key and publish the public
half as a JSON Web Key Set; the token's ``kid`` header names the key. A file is read at
start and read again when a token names a ``kid`` it lacks and the file has changed (key
rotation); a URL is fetched by PyJWT's ``PyJWKClient``, which caches the set for
``lifespan`` seconds and refetches at most once per cooldown for an unknown ``kid``.
An unknown ``kid`` is a 401; a JWKS URL that cannot be reached is a 503, never a 500.
"""

from __future__ import annotations

import threading
from pathlib import Path

import jwt
from jwt import PyJWK, PyJWKClient, PyJWKSet

from api.errors import ApiError

# The families a JWK's ``kty`` may sign for: a token's ``alg`` must match its key's.
_FAMILY = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}
FETCH_TIMEOUT_SECONDS = 2.0  # within C19's budget for an unreachable dependency


class JwksUnavailable(ApiError):
    def __init__(self, reason: str) -> None:
        super().__init__(503, f"The edge signing keys (JWKS) cannot be fetched: {reason}.", "edge_jwks_unavailable")


def unknown_key(kid: object) -> ApiError:
    return ApiError(401, f"The edge assertion names a signing key this service does not know (kid {kid!r}).", "edge_assertion_invalid")


def _load_file(path: Path) -> PyJWKSet:
    try:
        return PyJWKSet.from_json(path.read_text())
    except (OSError, ValueError, jwt.PyJWTError) as exc:
        raise ValueError(f"SQUADOPS_EDGE_JWKS: {path} is not a readable JWK Set: {exc}") from None


class EdgeKeys:
    """The public keys edge assertions verify with, by ``kid``."""

    def __init__(self, location: str, *, lifespan: float = 300.0, timeout: float = FETCH_TIMEOUT_SECONDS) -> None:
        self.location = location
        self.remote = location.startswith(("http://", "https://"))
        self._lock = threading.Lock()
        if self.remote:
            self._client = PyJWKClient(location, cache_jwk_set=True, lifespan=lifespan, timeout=timeout)
        else:
            self._path = Path(location.removeprefix("file://"))
            self._mtime = self._path.stat().st_mtime_ns if self._path.exists() else -1
            self._set = _load_file(self._path)

    def would_fetch(self, kid: object) -> bool:
        """True when finding ``kid`` may wait on the network (the caller moves off the loop)."""
        if not self.remote:
            return False
        cache = self._client.jwk_set_cache
        cached = cache.get() if cache is not None else None
        if cached is None:
            return True
        return not any(key.key_id == kid for key in cached.keys)

    def key(self, kid: object, alg: str) -> PyJWK:
        """The key named ``kid`` that signs with ``alg``; 401 when none, 503 when unreachable."""
        if not isinstance(kid, str) or not kid:
            raise ApiError(401, "The edge assertion has no kid header naming its signing key.", "edge_assertion_invalid")
        found = self._remote_key(kid) if self.remote else self._file_key(kid)
        family = _FAMILY.get(alg[:2])
        declared = getattr(found, "_jwk_data", {}).get("alg")
        if family is None or found.key_type != family or declared not in (None, alg):
            raise ApiError(401, f"The key {kid!r} does not sign with {alg}.", "edge_assertion_invalid")
        return found

    def _remote_key(self, kid: str) -> PyJWK:
        try:
            return self._client.get_signing_key(kid)
        except jwt.PyJWKClientConnectionError as exc:
            raise JwksUnavailable(str(exc).split(", err: ")[-1].strip('"')) from None
        except jwt.PyJWKClientError:
            raise unknown_key(kid) from None
        except jwt.PyJWTError as exc:  # the URL answered something that is not a JWK Set
            raise JwksUnavailable(f"the URL did not answer a JWK Set ({exc})") from None

    def _file_key(self, kid: str) -> PyJWK:
        found = self._match(kid)
        if found is None:
            with self._lock:
                mtime = self._path.stat().st_mtime_ns if self._path.exists() else -1
                if mtime != self._mtime:  # the file was rotated: read it again
                    try:
                        self._set = _load_file(self._path)
                    except ValueError as exc:
                        raise JwksUnavailable(str(exc)) from None
                    self._mtime = mtime
            found = self._match(kid)
        if found is None:
            raise unknown_key(kid)
        return found

    def _match(self, kid: str) -> PyJWK | None:
        for key in self._set.keys:
            if key.key_id == kid and key.public_key_use in ("sig", None):
                return key
        return None
