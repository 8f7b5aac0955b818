"""The pages' JavaScript (api/web/static/js), checked by real tools: every module parses
(``node --check``) and passes ESLint's recommended rules (pinned in .jslint/package-lock.json,
installed by ``make test``; the config is .jslint/eslint.config.js)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "api" / "web" / "static" / "js"
ESLINT = ROOT / ".jslint" / "node_modules" / ".bin" / "eslint"


def modules() -> list[Path]:
    return sorted(SCRIPTS.rglob("*.js"))


def test_there_are_modules_to_check() -> None:
    assert len(modules()) >= 10


@pytest.mark.parametrize("module", modules(), ids=lambda p: str(p.relative_to(SCRIPTS)))
def test_every_module_parses(module: Path) -> None:
    node = shutil.which("node")
    assert node, "node is not installed: `make test` installs Debian's nodejs"
    # --check parses without running; .js files under a module-typed package.json would be
    # modules, so give node the module's source as an ES module on stdin.
    checked = subprocess.run(
        [node, "--check", "--input-type=module"], input=module.read_bytes(), capture_output=True, timeout=60
    )
    assert checked.returncode == 0, checked.stderr.decode()


def test_eslint_finds_nothing() -> None:
    assert ESLINT.exists(), "ESLint is not installed: `make test` runs `npm ci` in .jslint"
    linted = subprocess.run(
        [str(ESLINT), "--config", ".jslint/eslint.config.js", "--max-warnings", "0", "api/web/static/js"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert linted.returncode == 0, linted.stdout + linted.stderr
