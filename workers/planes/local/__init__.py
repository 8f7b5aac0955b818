"""The local execution plane: agent CLIs as subprocesses in git worktrees (C21)."""

from workers.planes.local.launch import LocalConfig
from workers.planes.local.plane import LocalPlane

__all__ = ["LocalConfig", "LocalPlane"]
