"""The one path builder for what the service keeps under its data directory.

Every part joined under a root must be an identifier (``domain.shared.ids``, C12: no ``/``,
no ``.``, no NUL), and the result must resolve inside the root (no symbolic link leads
out). Anything else is refused with ``OutsideRoot`` before a file is touched.
"""

from __future__ import annotations

from pathlib import Path

from domain.shared.ids import is_valid_id


class OutsideRoot(ValueError):
    """A path that would not be an identifier-named place inside its root."""


def inside(root: Path, *parts: str, suffix: str = "") -> Path:
    """``root/part/…/part<suffix>``, each part an identifier; refused when it leaves ``root``."""
    for part in parts:
        if not is_valid_id(part):
            raise OutsideRoot(f"{part!r} is not an identifier [A-Za-z0-9_-]{{1,128}}")
    base = root.resolve()
    path = base.joinpath(*parts[:-1], parts[-1] + suffix) if parts else base
    resolved = path.resolve()
    if resolved != base and base not in resolved.parents:
        raise OutsideRoot(f"{path} is outside {base}")
    return path
