"""The pages' HTML shells: a template per page, its config embedded as inert JSON.

Pages carry no data of their own. Each shell names its ES module and hands it a config
(who calls, for which tenant, which run) in a ``<script type="application/json">``; the
module reads everything else from the same endpoints as any API client.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from string import Template
from typing import Any

import msgspec

HERE = Path(__file__).parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"

# Nothing is fetched from elsewhere, nothing runs inline: sprites are inline SVG and CSS.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'; form-action 'self'"
)
PAGE_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}

_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026"}


def inert_json(value: Any) -> str:
    """JSON safe inside a ``<script type="application/json">`` element."""
    return msgspec.json.encode(value).decode().translate(_ESCAPES)


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


@cache
def template(name: str) -> Template:
    return Template((TEMPLATES / f"{name}.html").read_text())


def render(
    name: str,
    *,
    title: str,
    config: dict[str, Any],
    who: str = "",
    fields: dict[str, str] | None = None,
    script: bool = True,
) -> str:
    """The page ``name``: its title, its ``fields`` (escaped), its config, the caller's name."""
    values = {key: escape(value) for key, value in (fields or {}).items()}
    body = template(name).substitute(title=escape(title), **values)
    styles = [f'<link rel="stylesheet" href="/static/css/{css}.css">' for css in ("base", name) if (STATIC / "css" / f"{css}.css").is_file()]
    module = f'<script type="module" src="/static/js/{name}.js"></script>' if script else ""
    return template("layout").substitute(
        title=escape(title),
        page=name,
        styles="\n".join(styles),
        script=module,
        body=body,
        config=inert_json({"page": name, **config}),
        who=f"Signed in as <strong>{escape(who)}</strong>" if who else "",
    )
