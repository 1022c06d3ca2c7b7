"""``powercut store serve|index``: the results store's page (every run of every target with
its verdict, ``harness.report.store_page``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.errors import ConfigError


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    st = sub.add_parser(
        "store",
        help="the results store's page: every run of every target with its verdict",
        description=(
            "A results store holds a directory per target (history.jsonl, runs/<run_id>/, "
            "allure-history.jsonl), written by `powercut run --store DIR --target NAME`."
        ),
    )
    ssub = st.add_subparsers(dest="store_command", required=True, metavar="COMMAND")
    sv = ssub.add_parser("serve", help="serve the store read-only, with the index at /")
    sv.add_argument("--store", type=Path, required=True, help="the results store directory")
    sv.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    sv.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    sv.set_defaults(func=cmd_serve)
    ix = ssub.add_parser("index", help="write the index page once (to a file or stdout)")
    ix.add_argument("--store", type=Path, required=True, help="the results store directory")
    ix.add_argument("--out", "-o", type=Path, default=None, help="file (default stdout)")
    ix.set_defaults(func=cmd_index)


def _store(args: argparse.Namespace) -> Path:
    store: Path = args.store
    if not store.is_dir():
        raise ConfigError(f"results store {store}: not a directory", field="--store")
    return store


def cmd_serve(args: argparse.Namespace) -> int:
    from harness.report.store_page import serve

    store = _store(args)
    if not 0 < args.port < 65536:
        raise ConfigError(f"--port {args.port}: must be 1-65535", field="--port")
    print(f"serving {store} on http://{args.host}:{args.port}/", file=sys.stderr, flush=True)
    serve(store, args.host, args.port)
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    from harness.report.store_page import render_index

    page = render_index(_store(args))
    if args.out:
        args.out.write_text(page)
    else:
        sys.stdout.write(page)
    return 0
