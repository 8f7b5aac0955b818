"""``Allow`` on OPTIONS names every method of the path (a Litestar 2.25 quirk, mended).

Litestar gives each path an OPTIONS answer when its first handler is registered. A second
handler on the same path (``GET /v1/project-factory/projects`` beside its ``POST``)
rebuilds the route but keeps that answer, still bound to the first route: its ``Allow``
lists the first handler's methods only. ``mend_options_allow`` binds each answer to the
route it belongs to, so ``Allow`` names what the path answers (the 405's ``Allow`` is
right already).
"""

from __future__ import annotations

from litestar import Litestar
from litestar.routes import HTTPRoute


def mend_options_allow(app: Litestar) -> Litestar:
    for route in app.routes:
        if not isinstance(route, HTTPRoute):
            continue
        for handler in route.route_handlers:
            fn = handler.fn
            code = getattr(fn, "__code__", None)
            if (
                handler.http_methods == {"OPTIONS"}
                and code is not None
                and code.co_freevars == ("self",)
                and fn.__qualname__.startswith("HTTPRoute.create_options_handler")
                and fn.__closure__ is not None
            ):
                fn.__closure__[0].cell_contents = route
    return app
