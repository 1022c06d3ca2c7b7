"""``--context NAME``, as kubectl's: the option of every command that talks to the target
cluster (``run``, ``preflight``, ``recover``, ``power``, ``budgets``, ``longevity``)."""

from __future__ import annotations

import argparse

CONTEXT_HELP = (
    "the kubeconfig context to use instead of the inventory's cluster.context, resolved as "
    "kubectl's --context (an unknown one: the valid ones are listed). Its cluster must hold "
    "a Node of every name the inventory names, or nothing is touched (exit 2, naming the "
    "context, its server and the missing nodes); docs/connecting.md"
)


def add_context_option(p: argparse.ArgumentParser) -> None:
    """The ``--context`` option (applied with :func:`harness.kube.target.aim_at_context`)."""
    p.add_argument("--context", default=None, metavar="NAME", help=CONTEXT_HELP)
