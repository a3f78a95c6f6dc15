"""``corpus serve``: the search API (and Dify's external knowledge API) over HTTP.

    corpus serve [--host 127.0.0.1] [--port 8000]

Keys come from ``CORPUS_API_KEYS`` (comma-separated); without one the server listens on
127.0.0.1 only. The OpenAPI schema and a console are at ``/docs``.
"""

from __future__ import annotations

import argparse
import sys

from corpus_pipeline.errors import ConfigError
from corpus_pipeline.store.layout import Layout


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("serve", help="serve search over HTTP (JSON API, Dify external knowledge API, /docs)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (non-loopback needs CORPUS_API_KEYS)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    p.add_argument("--rate", type=float, default=20.0, help="requests per second per client (0: unlimited)")
    p.add_argument("--max-body-kb", type=int, default=64, help="largest request body accepted")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from corpus_pipeline.serve.app import API_KEYS_ENV, api_keys_from_env, check_bind, create_app

    layout = Layout.from_env()
    keys = api_keys_from_env()
    refused = check_bind(args.host, keys)
    if refused:
        raise ConfigError(refused)
    if not keys:
        print(f"corpus serve: no {API_KEYS_ENV} set: no key is asked for, listening on {args.host} only",
              file=sys.stderr)  # fmt: skip
    app = create_app(layout.home, api_keys=keys, max_body_bytes=args.max_body_kb * 1024, rate_per_s=args.rate)
    print(f"corpus serve: {layout.home} on http://{args.host}:{args.port} (API schema at /docs)", file=sys.stderr)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    return 0
