"""``corpus serve``: the search API (and Dify's external knowledge API) over HTTP.

    corpus serve [--host 127.0.0.1] [--port 8000] [--workers N]

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
    p.add_argument(
        "--key-rate",
        type=float,
        default=100.0,
        help="requests per second per API key, whatever address it comes from (0: unlimited)",
    )
    p.add_argument("--max-body-kb", type=int, default=64, help="largest request body accepted")
    p.add_argument(
        "--client-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="a request's headers, and then its body, must arrive within this (else 408)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="processes serving the same port (each opens the KBs itself; rate limits are per process)",
    )
    p.add_argument(
        "--graceful-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="on SIGTERM, how long requests in flight may take to finish",
    )
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
    import json
    import os

    from corpus_pipeline.serve import protocol
    from corpus_pipeline.serve.app import API_KEYS_ENV, SETTINGS_ENV, api_keys_from_env, check_bind

    layout = Layout.from_env()
    keys = api_keys_from_env()
    refused = check_bind(args.host, keys)
    if refused:
        raise ConfigError(refused)
    if not 1 <= args.workers <= 64:
        raise ConfigError(f"--workers {args.workers}: give 1 to 64 processes")
    if args.client_timeout <= 0:
        raise ConfigError(f"--client-timeout {args.client_timeout}: give a number of seconds above 0")
    if not keys:
        print(f"corpus serve: no {API_KEYS_ENV} set: no key is asked for, listening on {args.host} only",
              file=sys.stderr)  # fmt: skip
    settings = {
        "home": str(layout.home),
        "max_body_bytes": args.max_body_kb * 1024,
        "rate_per_s": args.rate,
        "key_rate_per_s": args.key_rate,
        "body_timeout": args.client_timeout,
        "warm": True,
    }
    os.environ[SETTINGS_ENV] = json.dumps(settings)  # (read by each worker's app_from_env)
    if args.workers > 1 and "OMP_NUM_THREADS" not in os.environ:  # (the model's threads: the cores shared out)
        os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // args.workers))
    print(
        f"corpus serve: {layout.home} on http://{args.host}:{args.port} "
        f"({args.workers} process{'es' if args.workers > 1 else ''}; API schema at /docs, readiness at /readyz)",
        file=sys.stderr,
    )
    from corpus_pipeline.serve.local import announce

    announce(layout, args.host, args.port)  # (`corpus search` of this home asks this server)
    trust, proxies = proxy_settings(args)
    cfg = protocol.config(
        "corpus_pipeline.serve.app:app_from_env",
        factory=True,
        header_timeout=args.client_timeout,
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_level="warning",
        access_log=False,
        proxy_headers=trust,
        forwarded_allow_ips=proxies,
        timeout_graceful_shutdown=args.graceful_timeout,
    )
    protocol.serve(cfg)
    return 0
