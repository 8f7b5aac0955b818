"""The pages' HTML: Jinja templates through Litestar's engine, autoescaped, config as inert JSON.

Pages carry little data of their own. Each page extends ``layout.html``, names its ES
module and hands it a config (who calls, for which tenant, which run) in a
``<script type="application/json">``; the module reads everything else from the same
endpoints as any API client. Every value a template prints is escaped by Jinja
(``autoescape``); JSON for scripts goes through the ``inert`` filter.
"""

from __future__ import annotations

import hashlib
import mimetypes
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.response import Template
from litestar.template.config import TemplateConfig
from markupsafe import Markup

from api.web.diff_view import warm
from api.web.office_view import sprite_parts

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


def environment() -> Environment:
    """The pages' Jinja environment: templates from ``templates/``, every value escaped."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["inert"] = lambda value: Markup(inert_json(value))
    env.globals["styles_of"] = styles_of
    env.globals["modules_of"] = lambda name: module_graph(f"{name}.js")
    env.globals["pixels"] = sprite_parts()  # the office's figure (templates/office/agent.html)
    return env


def template_config() -> TemplateConfig[JinjaTemplateEngine]:
    """Litestar's template engine for the pages (given to the app)."""
    warm()
    return TemplateConfig(instance=JinjaTemplateEngine.from_environment(environment()))


def styles_of(name: str) -> list[str]:
    """The style sheets of page ``name``: the base one and its own, where they exist."""
    return [css for css in ("base", name) if (STATIC / "css" / f"{css}.css").is_file()]


def render(
    name: str,
    *,
    title: str,
    config: dict[str, Any],
    who: str = "",
    status_code: int = 200,
    script: bool = True,
    initial: bytes = b"",
    **context: Any,
) -> Template:
    """The page ``templates/<name>.html`` as a response: its title, its ``context``, its
    config (inert JSON), the caller's name and ``initial``, encoded JSON the page starts
    from instead of asking for it first."""
    return Template(
        template_name=f"{name}.html",
        context={
            "page": name,
            "title": title,
            "who": who,
            "script": script,
            "config": {"page": name, **config},
            "initial": Markup(inert(initial)) if initial else "",
            **context,
        },
        status_code=status_code,
        headers=PAGE_HEADERS,
        media_type="text/html; charset=utf-8",
    )


def page(
    name: str,
    title: str,
    caller: Any,
    request: Any,
    initial: bytes = b"",
    context: dict[str, Any] | None = None,
    **config: Any,
) -> Template:
    """Page ``name`` for ``caller``: ``context`` for its template, ``config`` for its script
    (its string values for the template too)."""
    return render(
        name,
        title=title,
        initial=initial,
        who=caller.principal.email,
        config={
            "tenant": caller.tenant,
            # Given in the page's address: the page's own requests carry it on.
            "tenant_query": request.query_params.get("tenant_id", ""),
            "subject_key": caller.subject_key,
            **config,
        },
        **({key: value for key, value in config.items() if isinstance(value, str)} | (context or {})),
    )
