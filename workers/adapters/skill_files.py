"""A directory of skill files (``*.json``, one skill each) as a skill source."""

from __future__ import annotations

from pathlib import Path

import msgspec

from domain.portal.skills import Skill

_decode = msgspec.json.Decoder(Skill).decode


class DirectorySkills:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.name = f"dir:{self.path}"

    def skills(self) -> list[Skill]:
        return [_decode(f.read_bytes()) for f in sorted(self.path.glob("*.json"))]
