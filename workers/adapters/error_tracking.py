"""Error-reporting DSN adapters: Sentry's client-keys API when configured, else none.

``SentryKeysDsn`` asks ``POST {url}/api/0/projects/{org}/{project}/keys/`` for a client
key and answers its public DSN. Without a configured URL the built-in answers ``""``
(recorded as ``disabled``)."""

from __future__ import annotations

import json
import urllib.request


class NoDsn:
    def provision(self, *, tenant: str, project_slug: str) -> str:
        return ""


class SentryKeysDsn:
    def __init__(self, url: str, token: str, org: str, timeout: float = 3.0) -> None:
        self.url, self.token, self.org, self.timeout = url.rstrip("/"), token, org, timeout

    def provision(self, *, tenant: str, project_slug: str) -> str:
        request = urllib.request.Request(
            f"{self.url}/api/0/projects/{self.org}/{project_slug}/keys/",
            data=json.dumps({"name": f"{tenant}/{project_slug}"}).encode(),
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=self.timeout) as answer:  # noqa: S310 (configured URL)
            body = json.loads(answer.read() or b"{}")
        dsn = (body.get("dsn") or {}).get("public") if isinstance(body, dict) else None
        if not isinstance(dsn, str) or not dsn:
            raise ValueError("the error-tracking service answered no public DSN")
        return dsn
