"""The service over an existing database, plus a static 2 KB endpoint, for ``bench_feed``.

Run as ``python -m bench.feed_server DATABASE_URL PORT``; serves until terminated. No
workers run in it: the feed is the stored document of read models already built.
"""

from __future__ import annotations

import sys

import msgspec
import uvicorn
from litestar import get
from litestar.response import Response

from api.app import create_app
from workers.bootstrap import build
from workers.settings import Settings

STATIC = msgspec.json.encode({"items": ["x" * 62] * 31})[:2046].ljust(2046, b" ") + b"\n\n"
assert len(STATIC) == 2048


@get("/bench/static", sync_to_thread=False, include_in_schema=False)
def static() -> Response[bytes]:
    return Response(STATIC, media_type="text/plain")


def main(url: str, port: int) -> None:
    container = build(Settings(database_url=url, log_level="warning"))
    app = create_app(container, workers=())
    app.register(static)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="error", access_log=False)
    container.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
