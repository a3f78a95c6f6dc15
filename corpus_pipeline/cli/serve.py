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
    p.add_argument(
        "--forwarded-allow-ips",
        default="",
        metavar="ADDRS",
        help="comma-separated addresses of proxies whose X-Forwarded-For / -Proto are trusted "
        "(default none: the client is the connection's address, whatever a header says)",
    )
    p.set_defaults(func=run)


def proxy_settings(args: argparse.Namespace) -> tuple[bool, str]:
    """uvicorn's proxy settings: headers trusted only from the proxies the operator named.
    (uvicorn trusts them from 127.0.0.1 by default: a local client rotating X-Forwarded-For
    got a fresh rate-limit bucket with every request.)"""
    proxies = [a.strip() for a in str(args.forwarded_allow_ips or "").split(",") if a.strip()]
    return bool(proxies), ",".join(proxies)


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
    trust, proxies = proxy_settings(args)
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
        proxy_headers=trust,
        forwarded_allow_ips=proxies,
    )
    return 0
