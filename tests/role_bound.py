"""An identity bound to one ClusterRole alone, on a real API server (RBAC on): a
ServiceAccount, the role applied under its name, a ClusterRoleBinding, a token from the
TokenRequest API and a kubeconfig holding only that token. The lab's RBAC test
(tests/lab/test_rbac_lab.py) and the management cluster's runner (tests/mgmt/conftest.py)
both run powercut through one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from harness.kube.client import KubeClient

ROLE = Path(__file__).resolve().parents[1] / "deploy" / "rbac" / "target-clusterrole.yaml"


def target_role() -> dict[str, Any]:
    """deploy/rbac/target-clusterrole.yaml, as shipped."""
    doc: dict[str, Any] = yaml.safe_load(ROLE.read_text())
    return doc


def service_account_user(name: str, namespace: str) -> str:
    """The user name the API server gives the ServiceAccount's tokens."""
    return f"system:serviceaccount:{namespace}:{name}"


def grant(
    client: KubeClient,
    name: str,
    role: dict[str, Any],
    *,
    namespace: str = "default",
    expiration_s: int = 3600,
) -> str:
    """A ServiceAccount ``namespace/name`` bound to ``role`` (a ClusterRole document, applied
    under ``name``) and nothing else; returns a token for it from the TokenRequest API.
    ``client`` holds admin credentials."""
    role = {**role, "metadata": {**role["metadata"], "name": name}}
    client.apply(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}", role)
    sa = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": namespace},
    }
    client.apply(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}", sa)
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    }
    client.apply(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{name}", binding)
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": expiration_s},
    }
    answer = client.create(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", request)
    return str(answer["status"]["token"])


def revoke(client: KubeClient, name: str, *, namespace: str = "default") -> None:
    """Remove what ``grant`` made (its tokens stop working with the ServiceAccount)."""
    for path in (
        f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{name}",
        f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}",
    ):
        if client.get_or_none(path) is not None:
            client.delete(path)


def token_kubeconfig(admin_kubeconfig: Path, name: str, token: str, dest: Path) -> Path:
    """A kubeconfig at ``dest`` with the admin kubeconfig's first cluster (server and CA)
    and only ``token`` as its user: none of the admin's credentials."""
    admin = yaml.safe_load(admin_kubeconfig.read_text())
    cluster = admin["clusters"][0]
    dest.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [cluster],
                "users": [{"name": name, "user": {"token": token}}],
                "contexts": [{"name": name, "context": {"cluster": cluster["name"], "user": name}}],
                "current-context": name,
            }
        )
    )
    dest.chmod(0o600)
    return dest


def _rbac_path(doc: dict[str, Any]) -> str:
    base = "/apis/rbac.authorization.k8s.io/v1"
    plural = {"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings",
              "Role": "roles", "RoleBinding": "rolebindings"}[doc["kind"]]  # fmt: skip
    ns = doc["metadata"].get("namespace")
    where = f"/namespaces/{ns}" if ns else ""
    return f"{base}{where}/{plural}/{doc['metadata']['name']}"


def tier_docs(name: str, tiers: list[str], namespaces: list[str], namespace: str) -> list[Any]:
    """What ``powercut rbac`` renders for these tiers, named after ``name``, bound to the
    ServiceAccount ``namespace/name``."""
    from harness.rbac import render

    subject = {"kind": "ServiceAccount", "name": name, "namespace": namespace}
    return render(tiers, namespaces, subject=subject, prefix=name)


def grant_tiers_to_user(
    client: KubeClient, user: str, tiers: list[str], namespaces: list[str], *, prefix: str
) -> None:
    """Exactly ``tiers`` (as ``powercut rbac --user`` renders them; Roles in ``namespaces``),
    named after ``prefix``, bound to the user ``user``: an identity this API server does not
    issue itself (an OIDC user, or another cluster's ServiceAccount through an
    AuthenticationConfiguration's JWT authenticator)."""
    from harness.rbac import render

    subject = {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}
    for doc in render(tiers, namespaces, subject=subject, prefix=prefix):
        client.apply(_rbac_path(doc), doc)


def grant_tiers(
    client: KubeClient,
    name: str,
    tiers: list[str],
    namespaces: list[str],
    *,
    namespace: str = "default",
    expiration_s: int = 3600,
) -> str:
    """A ServiceAccount ``namespace/name`` holding exactly ``tiers`` (harness/rbac.py, as
    ``powercut rbac`` renders them; Roles in ``namespaces``); returns a token for it."""
    sa = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": namespace},
    }
    client.apply(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}", sa)
    for doc in tier_docs(name, tiers, namespaces, namespace):
        client.apply(_rbac_path(doc), doc)
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": expiration_s},
    }
    answer = client.create(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", request)
    return str(answer["status"]["token"])


def revoke_tiers(
    client: KubeClient,
    name: str,
    tiers: list[str],
    namespaces: list[str],
    *,
    namespace: str = "default",
) -> None:
    """Remove what ``grant_tiers`` made."""
    for doc in tier_docs(name, tiers, namespaces, namespace):
        if client.get_or_none(_rbac_path(doc)) is not None:
            client.delete(_rbac_path(doc))
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}"
    if client.get_or_none(path) is not None:
        client.delete(path)
