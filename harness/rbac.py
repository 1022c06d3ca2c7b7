"""Least privilege in tiers: the RBAC objects the chosen features need, and nothing else.

``deploy/rbac/target-clusterrole.yaml`` holds every request powercut's code can make (the
unit test ``tests/unit/test_rbac_role.py`` keeps it exact). Most uses need a fraction of it,
so it is split here by what each family of features does (docs/rbac.md, "Tiers"):

- ``read``: observe (nodes, pods, events, volumes, workloads, budgets); preflight, dry runs
  and reports need nothing more. A ClusterRole.
- ``lock``: powercut's own lock, the Lease ``kube-system/powercut-lock``: a Role in
  ``kube-system``, its writes limited to that name by ``resourceNames`` (``create`` cannot
  be: the API server authorizes a create before the object has a name; the lock's
  ValidatingAdmissionPolicy, deploy/rbac/lock-policy.yaml, keeps the name to powercut's
  identity).
- ``node-patch``: cordon, uncordon, taints (drains, maintenance, out-of-service).
- ``evict``: the Eviction API (drains).
- ``node-delete``: the "deleted Node" features (delete, and re-create on undo).
- ``workloads``: Jobs re-run from their manifest, pods force-deleted or restarted, the
  data check through a pod's proxy: a Role in each namespace the inventory names.

:func:`tiers_for` reads feature files and picks the tiers their steps need;
:func:`render` writes the objects; :func:`required` lists the permissions they grant, for
preflight's SelfSubjectAccessReviews.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.kube.client import KubeClient
from harness.kube.lock import LEASE_NAME, LEASE_NAMESPACE

JSON = dict[str, Any]
LABELS = {"app.kubernetes.io/name": "powercut"}


def _rule(group: str, resources: Sequence[str], verbs: Sequence[str], **extra: Any) -> JSON:
    return {"apiGroups": [group], "resources": list(resources), "verbs": list(verbs), **extra}


@dataclass(frozen=True)
class Tier:
    """One family's permissions: cluster-wide rules (a ClusterRole) and rules in the
    inventory's namespaces or in ``namespace`` (a Role each)."""

    name: str
    why: str
    cluster_rules: tuple[JSON, ...] = ()
    namespaced_rules: tuple[JSON, ...] = ()
    #: a fixed namespace for the Role (the lock's); None: every inventory namespace
    namespace: str | None = None
    #: words in a feature's steps that need this tier (a regular expression)
    needed_by: str = ""


TIERS: dict[str, Tier] = {
    t.name: t
    for t in (
        Tier(
            "read",
            "observe the cluster: preflight, dry runs, reports, every scenario",
            cluster_rules=(
                _rule("", ["nodes"], ["get", "list", "watch"]),
                _rule("", ["pods"], ["list", "watch"]),
                _rule("", ["persistentvolumeclaims"], ["get", "list", "watch"]),
                _rule("", ["events"], ["list", "watch"]),
                _rule("", ["namespaces"], ["get"]),
                _rule("apps", ["deployments", "statefulsets", "daemonsets"], ["get", "list"]),
                _rule("policy", ["poddisruptionbudgets"], ["list"]),
                _rule("discovery.k8s.io", ["endpointslices"], ["list", "watch"]),
                _rule("storage.k8s.io", ["volumeattachments"], ["list", "watch"]),
                _rule("metal3.io", ["baremetalhosts"], ["list"]),
                _rule("authorization.k8s.io", ["selfsubjectaccessreviews"], ["create"]),
                {"nonResourceURLs": ["/version", "/readyz"], "verbs": ["get"]},
            ),
        ),
        Tier(
            "lock",
            f"powercut's own lock, the Lease {LEASE_NAMESPACE}/{LEASE_NAME}",
            namespaced_rules=(
                _rule("coordination.k8s.io", ["leases"], ["create"]),
                _rule(
                    "coordination.k8s.io",
                    ["leases"],
                    ["get", "update", "patch", "delete"],
                    resourceNames=[LEASE_NAME],
                ),
            ),
            namespace=LEASE_NAMESPACE,
        ),
        Tier(
            "node-patch",
            "cordon, uncordon and taint nodes (drains, maintenance, out-of-service)",
            cluster_rules=(_rule("", ["nodes"], ["patch"]),),
            needed_by=r"cordon|drain|out-of-service|taint\S* (is|are) removed|maintenance",
        ),
        Tier(
            "evict",
            "evict pods through the Eviction API (drains)",
            cluster_rules=(_rule("", ["pods/eviction"], ["create"]),),
            needed_by=r"drain|evict",
        ),
        Tier(
            "node-delete",
            "delete a Node object and re-create it on undo",
            cluster_rules=(_rule("", ["nodes"], ["create", "delete"]),),
            needed_by=r"Node object is deleted|nodes? (is|are) deleted|delete(s|d)? the node",
        ),
        Tier(
            "workloads",
            "re-run Jobs, force-delete or restart pods, check data through a pod's proxy",
            namespaced_rules=(
                _rule("", ["pods"], ["delete"]),
                _rule("", ["pods/proxy"], ["get", "update"]),
                _rule("batch", ["jobs"], ["get", "list", "watch", "create", "delete"]),
            ),
            needed_by=r"\bJob\b|force-delet|are restarted|token is written|read back",
        ),
    )
}
#: what every run needs: observing and the lock
BASE = ("read", "lock")


@dataclass
class Choice:
    """The tiers chosen, and for each the feature files that asked for it."""

    tiers: list[str]
    why: dict[str, list[str]] = field(default_factory=dict)
    #: namespaces the steps name ("... in namespace lab"), beside the inventory's
    namespaces: list[str] = field(default_factory=list)


def tiers_for(features: Iterable[Path]) -> Choice:
    """The tiers the steps of these ``.feature`` files (and the chaos experiments beside
    them) need, by the words of their steps; ``read`` and ``lock`` always."""
    why: dict[str, list[str]] = {}
    namespaces: set[str] = set()
    for path in features:
        text = path.read_text(errors="replace")
        steps = "\n".join(action_steps(text))
        namespaces.update(re.findall(r"\bin namespace ([a-z0-9][-a-z0-9]*)", steps))
        for tier in TIERS.values():
            if tier.needed_by and re.search(tier.needed_by, steps, re.IGNORECASE):
                why.setdefault(tier.name, []).append(path.name)
    chosen = [*BASE, *(name for name in TIERS if name in why and name not in BASE)]
    return Choice(chosen, why, sorted(namespaces))


def action_steps(text: str) -> list[str]:
    """The steps of a feature that act (Given, When and the And/But after them): a Then
    only reads, which the ``read`` tier grants."""
    out: list[str] = []
    acting = False
    for line in text.splitlines():
        m = re.match(r"\s*(Given|When|Then|And|But|\*)\b", line)
        if m is None:
            continue
        if m.group(1) in ("Given", "When", "Then"):
            acting = m.group(1) != "Then"
        if acting:
            out.append(line.strip())
    return out


def feature_files(directories: Iterable[Path]) -> list[Path]:
    """Every ``.feature`` file under the directories, sorted."""
    out: list[Path] = []
    for d in directories:
        out.extend(sorted(d.rglob("*.feature")) if d.is_dir() else [d])
    return out


def render(
    tiers: Sequence[str],
    namespaces: Sequence[str],
    *,
    subject: JSON,
    prefix: str = "powercut",
) -> list[JSON]:
    """The ClusterRoles, Roles and their bindings to ``subject`` (an RBAC subject) that
    grant ``tiers``: namespaced rules in each of ``namespaces``."""
    docs: list[JSON] = []
    for name in tiers:
        tier = TIERS[name]
        role = f"{prefix}-{name}"
        meta = {"name": role, "labels": dict(LABELS)}
        if tier.cluster_rules:
            docs.append(_doc("ClusterRole", meta, rules=list(tier.cluster_rules)))
            docs.append(_binding("ClusterRoleBinding", meta, "ClusterRole", subject))
        if tier.namespaced_rules:
            for ns in [tier.namespace] if tier.namespace else sorted(set(namespaces)):
                m = {**meta, "namespace": ns}
                docs.append(_doc("Role", m, rules=list(tier.namespaced_rules)))
                docs.append(_binding("RoleBinding", m, "Role", subject))
    return docs


def _doc(kind: str, meta: JSON, **body: Any) -> JSON:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta, **body}


def _binding(kind: str, meta: JSON, role_kind: str, subject: JSON) -> JSON:
    return _doc(
        kind,
        meta,
        roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": meta["name"]},
        subjects=[subject],
    )


@dataclass(frozen=True, order=True)
class Permission:
    """One verb a tier grants: on a resource (in a namespace, of a name) or a URL."""

    group: str
    resource: str
    verb: str
    namespace: str = ""
    name: str = ""
    tier: str = field(default="", compare=False)

    def __str__(self) -> str:
        if self.resource.startswith("/"):
            return f"{self.verb} on the non-resource URL {self.resource}"
        group = f"the API group {self.group!r}" if self.group else 'the core API group ""'
        where = f" in namespace {self.namespace}" if self.namespace else " cluster-wide"
        named = f" named {self.name!r}" if self.name else ""
        return f"{self.verb} on {self.resource!r}{named} in {group}{where} (tier {self.tier})"


def required(tiers: Sequence[str], namespaces: Sequence[str]) -> list[Permission]:
    """Every permission the tiers grant, one per verb, resource, namespace and name."""
    out: list[Permission] = []
    for name in tiers:
        tier = TIERS[name]
        scopes: list[tuple[JSON, str]] = [(r, "") for r in tier.cluster_rules]
        for ns in [tier.namespace] if tier.namespace else sorted(set(namespaces)):
            scopes.extend((r, ns or "") for r in tier.namespaced_rules)
        for rule, ns in scopes:
            for verb in rule["verbs"]:
                for url in rule.get("nonResourceURLs", []):
                    out.append(Permission("", url, verb, tier=name))
                for group in rule.get("apiGroups", []):
                    for res in rule.get("resources", []):
                        for rn in rule.get("resourceNames") or [""]:
                            out.append(Permission(group, res, verb, ns, rn, tier=name))
    return out


SSAR_PATH = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


def review(permission: Permission) -> JSON:
    """The SelfSubjectAccessReview that asks whether this identity holds ``permission``."""
    spec: JSON
    if permission.resource.startswith("/"):
        spec = {"nonResourceAttributes": {"path": permission.resource, "verb": permission.verb}}
    else:
        resource, _, sub = permission.resource.partition("/")
        attrs = {
            "group": permission.group,
            "resource": resource,
            "subresource": sub,
            "verb": permission.verb,
            "namespace": permission.namespace,
            "name": permission.name,
        }
        spec = {"resourceAttributes": {k: v for k, v in attrs.items() if v}}
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": spec,
    }


def missing(client: KubeClient, permissions: Iterable[Permission]) -> list[Permission]:
    """The permissions the API server says these credentials lack (one
    SelfSubjectAccessReview each: every authenticated identity may ask about itself)."""
    lacking: list[Permission] = []
    for p in sorted(set(permissions)):
        answer = client.create(SSAR_PATH, review(p))
        if not (answer.get("status") or {}).get("allowed"):
            lacking.append(p)
    return lacking
