"""The pages' HTML shells: a template per page, its config embedded as inert JSON.

Pages carry no data of their own. Each shell names its ES module and hands it a config
(who calls, for which tenant, which run) in a ``<script type="application/json">``; the
module reads everything else from the same endpoints as any API client.
"""

from __future__ import annotations

import hashlib
import mimetypes
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from string import Template
from typing import Any

import msgspec

HERE = Path(__file__).parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"

# Nothing is fetched from elsewhere, nothing runs inline: sprites are inline SVG and CSS.
# Style attributes are allowed (a drawn character's colours; every value is escaped),
# style elements are not.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'; form-action 'self'"
)
PAGE_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}

_IMPORT = re.compile(r"""^\s*import\s[^"']*["'](\./[^"']+|\.\./[^"']+)["']""", re.MULTILINE)
_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026"}


def inert_json(value: Any) -> str:
    """JSON safe inside a ``<script type="application/json">`` element."""
    return inert(msgspec.json.encode(value))


def inert(encoded: bytes) -> str:
    """Encoded JSON made safe inside a ``<script type="application/json">`` element."""
    return encoded.decode().translate(_ESCAPES)


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


@cache
def template(name: str) -> Template:
    return Template((TEMPLATES / f"{name}.html").read_text())


@dataclass(frozen=True)
class Asset:
    """A static file as served: its bytes, type, validator and the mtime it was read at."""

    body: bytes
    media_type: str
    etag: str
    mtime: float


_assets: dict[str, Asset] = {}


def asset(path: str) -> Asset | None:
    """The static file at ``path`` (relative to ``static/``), from memory while unchanged.

    Only files under ``static/`` are found: the path is resolved and must stay inside.
    """
    file = (STATIC / path).resolve()
    if STATIC.resolve() not in file.parents:
        return None
    try:
        mtime = file.stat().st_mtime
    except OSError:
        return None
    known = _assets.get(path)
    if known is not None and known.mtime == mtime:
        return known
    body = file.read_bytes()
    media_type = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
    if media_type.startswith("text/"):
        media_type += "; charset=utf-8"
    found = Asset(body, media_type, '"' + hashlib.sha256(body).hexdigest()[:20] + '"', mtime)
    _assets[path] = found
    return found


def module_graph(entry: str) -> list[str]:
    """Every module ``js/<entry>`` imports, directly or not (preloaded in parallel)."""
    found: list[str] = []
    todo = [f"js/{entry}"]
    while todo:
        path = todo.pop()
        module = asset(path)
        if module is None:
            continue
        base = Path(path).parent
        for name in _IMPORT.findall(module.body.decode()):
            target = (base / name).as_posix()
            parts: list[str] = []
            for part in target.split("/"):
                if part == "..":
                    parts.pop()
                elif part != ".":
                    parts.append(part)
            target = "/".join(parts)
            if target not in found:
                found.append(target)
                todo.append(target)
    return sorted(found)


def render(
    name: str,
    *,
    title: str,
    config: dict[str, Any],
    who: str = "",
    fields: dict[str, str] | None = None,
    script: bool = True,
    initial: bytes = b"",
    markup: dict[str, str] | None = None,
) -> str:
    """The page ``name``: its title, its ``fields`` (escaped), its config, the caller's name,
    ``initial``, encoded JSON the page starts from instead of asking for it first, and
    ``markup``: HTML made by this package (inserted as is)."""
    values = {key: escape(value) for key, value in (fields or {}).items()} | (markup or {})
    body = template(name).substitute(title=escape(title), **values)
    styles = [f'<link rel="stylesheet" href="/static/css/{css}.css">' for css in ("base", name) if (STATIC / "css" / f"{css}.css").is_file()]
    module = ""
    if script:
        preloads = "".join(f'<link rel="modulepreload" href="/static/{path}">' for path in module_graph(f"{name}.js"))
        module = f'{preloads}<script type="module" src="/static/js/{name}.js"></script>'

    return template("layout").substitute(
        title=escape(title),
        page=name,
        styles="\n".join(styles),
        script=module,
        body=body,
        config=inert_json({"page": name, **config}),
        initial=f'<script type="application/json" id="initial-data">{inert(initial)}</script>' if initial else "",
        who=f"Signed in as <strong>{escape(who)}</strong>" if who else "",
    )
