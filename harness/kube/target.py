"""The cluster an inventory describes: its API client, and the guard of ``--context``.

An inventory's nodes and their BMCs belong to one cluster, reached through the kubeconfig
context it names (``cluster.context``, else the kubeconfig's current context). A command's
``--context NAME`` (as kubectl's) points the same inventory at another context of that
kubeconfig: handy when one kubeconfig holds several contexts for one cluster (an admin and
a ServiceAccount; a direct endpoint and one through a proxy), and dangerous when the other
context is another cluster: the BMCs would cut one cluster's machines while the watches
judge a second cluster's.

So a context chosen with ``--context`` is used only once its cluster holds a Node of every
name the inventory names (:func:`check_holds_nodes`), checked before anything is touched
(:func:`aim_at_context`) and again whenever a client for it is made (:func:`client_for`):
the error names the context, the cluster's server and the nodes it lacks. The context's
name is resolved as kubectl resolves it (:func:`harness.kube.kubeconfig.load_kubeconfig`).
docs/connecting.md, "Another context: --context".
"""

from __future__ import annotations

from typing import Any, Final

from harness.errors import ConfigError, PowercutError, TemporaryError
from harness.inventory import Inventory
from harness.kube.client import ApiError, KubeClient
from harness.kube.kubeconfig import current_context

__all__ = [
    "CONTEXT_CHECK_TIMEOUT_S",
    "ContextUnchecked",
    "aim_at_context",
    "check_holds_nodes",
    "client_for",
    "context_shown",
    "missing_nodes",
]

#: Longest wait for the Node list that checks a ``--context``'s cluster.
CONTEXT_CHECK_TIMEOUT_S: Final = 10.0
#: Missing nodes named in the error; more are counted.
SHOWN: Final = 10


class ContextUnchecked(TemporaryError):
    """The cluster of a ``--context`` did not answer, so whether it holds the inventory's
    nodes is unknown (nothing was touched). Temporary: it may answer later."""


def missing_nodes(client: KubeClient, names: list[str]) -> list[str]:
    """Which of ``names`` are not Nodes of the cluster ``client`` reaches (one list of the
    Nodes, as ``kubectl get nodes``; the pre-flight's ``node`` check asks one by one)."""
    items, _ = client.list("/api/v1/nodes")
    present = {str((n.get("metadata") or {}).get("name", "")) for n in items}
    return [n for n in names if n not in present]


def _fallback(inventory: Inventory) -> str:
    """What leaving ``--context`` out would use, for the error's advice."""
    own = inventory.context_replaced
    return f"the inventory's context {own!r}" if own else "the kubeconfig's current-context"


def check_holds_nodes(inventory: Inventory, client: KubeClient) -> None:
    """The guard of ``--context``: the cluster ``client`` reaches holds a Node of every
    name the inventory names. Otherwise a ``ConfigError`` naming the context, the server
    and the missing nodes; a cluster that does not answer is :class:`ContextUnchecked`, one
    that refuses the list a ``ConfigError`` saying so (either way nothing was touched)."""
    context = inventory.cluster.context or ""
    names = inventory.node_names()
    where = f"context {context!r} (--context) reaches {client.server}"
    try:
        missing = missing_nodes(client, names)
    except ApiError as exc:
        if isinstance(exc, TemporaryError):
            raise ContextUnchecked(
                f"{where}, which answers {exc.status} {exc.reason}: whether its cluster holds "
                "the inventory's nodes is unknown, so nothing was touched"
            ) from None
        raise ConfigError(
            f"{where}, which refuses to list its Nodes ({exc}): whether its cluster holds "
            "the inventory's nodes cannot be checked, so nothing was touched",
            field="--context",
        ) from None
    except TemporaryError as exc:
        raise ContextUnchecked(
            f"{where}, which does not answer ({exc}): whether its cluster holds the "
            "inventory's nodes is unknown, so nothing was touched"
        ) from None
    if not missing:
        return
    shown = ", ".join(missing[:SHOWN]) + (
        f" and {len(missing) - SHOWN} more" if len(missing) > SHOWN else ""
    )
    source = f" ({inventory.source})" if inventory.source else ""
    raise ConfigError(
        f"{where}, a cluster with no Node named {shown} ({len(missing)} of the "
        f"{len(names)} nodes of the inventory{source}): its nodes and BMCs belong to another "
        "cluster, so nothing was touched. Choose the context of their cluster (kubectl "
        f"config get-contexts) or leave --context out to use {_fallback(inventory)}",
        field="--context",
    )


def client_for(inventory: Inventory, **kw: Any) -> KubeClient:
    """A client of the inventory's cluster (``kw``: :class:`KubeClient`'s options). When
    its context came from ``--context``, the guard (:func:`check_holds_nodes`) runs first,
    with the same credentials, and a failing guard closes the client and raises."""
    c = inventory.cluster
    client = KubeClient.from_kubeconfig(c.kubeconfig, c.context, **kw)
    if inventory.context_from != "--context":
        return client
    checker = client.clone(maxsize=1)
    checker.timeout_s = min(client.timeout_s, CONTEXT_CHECK_TIMEOUT_S)
    try:
        check_holds_nodes(inventory, checker)
    except PowercutError:
        client.close()
        raise
    finally:
        checker.close()
    return client


def aim_at_context(inventory: Inventory, context: str | None) -> Inventory:
    """The inventory aimed at ``context`` (a command's ``--context``; None or '' leave it
    as it is, as kubectl ignores an empty one), once the guard has passed: an unknown
    context is kubectl's error with the valid ones listed, a cluster without the
    inventory's nodes the guard's (both before anything is touched)."""
    if not context:
        return inventory
    aimed = inventory.with_context(context)
    client_for(aimed, timeout_s=CONTEXT_CHECK_TIMEOUT_S).close()
    return aimed


def context_shown(inventory: Inventory) -> str:
    """Which context the inventory's client uses and where that came from, for the run's
    header and its report: ``prod (--context)``, ``prod (the inventory's cluster.context)``,
    ``kind-lab (the kubeconfig's current-context)``."""
    c = inventory.cluster
    if inventory.context_from == "--context":
        return f"{c.context} (--context)"
    if c.context:
        return f"{c.context} (the inventory's cluster.context)"
    try:
        name = current_context(c.kubeconfig) or "none"
    except PowercutError:
        name = "unknown"  # the kubeconfig cannot be read: the run says why where it is used
    return f"{name} (the kubeconfig's current-context)"
