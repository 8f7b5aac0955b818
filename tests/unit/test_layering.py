"""The layout holds: imports point down (domain <- projections <- api; workers wire them),
and no module outgrows what a reader can hold (500 lines).

Every import counts: module level, inside functions, and under ``if TYPE_CHECKING:``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("domain", "projections", "api", "workers")
# What each layer must never import.
FORBIDDEN = {
    "domain": {"projections", "api", "workers"},
    "projections": {"api", "workers"},
    "api": {"workers"},
}
MAX_LINES = 500
def modules() -> list[Path]:
    return sorted(p for layer in LAYERS for p in (ROOT / layer).rglob("*.py"))


def imported_packages(path: Path) -> set[tuple[str, int]]:
    """``(top-level package, line)`` of every import in ``path``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {(alias.name.split(".")[0], node.lineno) for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add((node.module.split(".")[0], node.lineno))
    return found


def test_imports_point_down() -> None:
    wrong = []
    for path in modules():
        layer = path.relative_to(ROOT).parts[0]
        for package, line in imported_packages(path):
            if package in FORBIDDEN.get(layer, set()):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {package}")
    assert wrong == [], "\n".join(sorted(wrong))


def test_no_module_is_over_500_lines() -> None:
    long = {
        str(p.relative_to(ROOT)): n for p in modules() if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}, "modules over 500 lines"


def test_the_checks_see_real_imports() -> None:
    """The walker finds imports wherever they are (guards the guard)."""
    source = ROOT / "api" / "app.py"
    assert ("api", 1) not in imported_packages(source)
    assert any(package == "projections" for package, _ in imported_packages(source))
