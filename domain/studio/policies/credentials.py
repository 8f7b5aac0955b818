"""Sandbox API credential blockers: when a session may say "not configured" or "invalid".

- ``sandbox_api_credentials_not_configured`` only when the studio credential profile
  cannot resolve. A session row without a credential reference proves nothing: the
  profile may still resolve (the row is filled at launch).
- ``sandbox_api_credentials_invalid`` when the key status endpoint answers 401 or 403:
  a key that exists but is refused is invalid, never "missing".
Anything else (resolved profile, other statuses, unknowns) is no credential blocker.
"""

from __future__ import annotations

from dataclasses import dataclass

from domain.studio.policies.blockers import CREDENTIALS_INVALID, CREDENTIALS_NOT_CONFIGURED

REFUSED_STATUSES = frozenset({401, 403})


@dataclass(frozen=True)
class CredentialCheck:
    """What the credential probe saw for one session.

    ``profile_resolved`` is None when the profile was not asked; ``key_status`` is the
    HTTP status of the key status endpoint, None when it was not called or unreachable;
    ``session_credential_ref`` is what the session row carries (possibly empty).
    """

    profile_resolved: bool | None
    key_status: int | None = None
    session_credential_ref: str = ""

    def evidence(self) -> dict[str, object]:
        return {
            "profile_resolved": self.profile_resolved,
            "key_status": self.key_status if self.key_status is not None else -1,
            "session_credential_ref": self.session_credential_ref,
        }


def credential_blocker(check: CredentialCheck) -> str:
    """The blocker code the check proves, or "" when it proves none."""
    if check.profile_resolved is False:
        return CREDENTIALS_NOT_CONFIGURED
    if check.key_status in REFUSED_STATUSES:
        return CREDENTIALS_INVALID
    return ""


def message_for(code: str, check: CredentialCheck) -> str:
    if code == CREDENTIALS_NOT_CONFIGURED:
        return "The studio credential profile cannot resolve sandbox API credentials."
    if code == CREDENTIALS_INVALID:
        return f"The sandbox key status endpoint answered {check.key_status}: the key is invalid."
    return ""
