"""Portal shapes: the permission explain view."""

from __future__ import annotations

import msgspec


class PathStep(msgspec.Struct, kw_only=True):
    """One edge of the path that granted access."""

    kind: str  # tuple | membership | implied | super_admin
    object: str
    relation: str
    subject: str


class PermissionCheckOut(msgspec.Struct, kw_only=True):
    """The graph's answer for the caller, with the path of tuples behind it."""

    tenant_id: str
    subject_key: str
    user: str
    object: str
    relation: str
    allowed: bool
    path: list[PathStep] = []
    group_paths: list[str] = []
