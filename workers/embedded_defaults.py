"""What the embedded default generates when a secret setting is missing (never in production).

``make run`` must answer every feature on a fresh clone, and some features need a secret
nobody has set yet: the model-proxy client key (developer workspaces' material and their
usage meter) and the key that signs agent tokens for ``/mcp``. Outside production, a
missing one is generated once and kept under the data dir, in ``<data_dir>/secrets/<name>``
(directory 0700, file 0600), so every ``squadops`` process sharing that data dir (``serve``,
``worker ticker`` ...) uses the same value, and the next start finds it again. An explicit
``SQUADOPS_*`` setting always wins; under ``SQUADOPS_ENV=production`` nothing is generated,
and the feature refuses clearly, naming the setting it lacks.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

import structlog

from workers.settings import Settings

log = structlog.get_logger("squadops.embedded_defaults")

# The settings the embedded default generates: field name -> random bytes of the value.
GENERATED_SECRETS = ("model_proxy_client_key", "mcp_token_key")
SECRET_BYTES = 32


def secrets_dir(settings: Settings) -> Path:
    return Path(settings.data_dir) / "secrets"


def is_production(settings: Settings) -> bool:
    return settings.env.strip().lower() == "production"


def with_embedded_defaults(settings: Settings) -> Settings:
    """``settings`` with each missing generated secret filled from (or written to) the data dir."""
    if is_production(settings):
        return settings
    changes = {
        name: kept_secret(secrets_dir(settings) / name)
        for name in GENERATED_SECRETS
        if not getattr(settings, name)
    }
    return settings.replace(**changes) if changes else settings


def kept_secret(path: Path) -> str:
    """The secret stored at ``path``, created (0600) the first time it is asked for.

    Written to a private temporary file and linked into place, so a second process starting
    at the same moment reads either nothing (and links its own, losing the race cleanly)
    or the whole value, never half of it.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(FileNotFoundError):
        return _read(path)
    value = secrets.token_hex(SECRET_BYTES)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(value + "\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            return _read(path)
    finally:
        temporary.unlink(missing_ok=True)
    log.info("embedded_secret_generated", path=str(path))
    return value


def _read(path: Path) -> str:
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:  # readable by others: this process keeps it to its owner from now on
        os.chmod(path, 0o600)
        log.warning("embedded_secret_mode_tightened", path=str(path), was=oct(mode))
    value = path.read_text().strip()
    if not value:
        raise OSError(f"{path} is empty; delete it and a new secret is generated")
    return value
