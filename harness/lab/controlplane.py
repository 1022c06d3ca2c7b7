"""Command lines and config files of the control-plane components, per control-plane node."""

from __future__ import annotations

from pathlib import Path

import yaml

from harness.lab.spec import CLUSTER_CIDR, NODE_CIDR_MASK, LabSpec, NodeSpec


def write_kubeconfig(
    path: Path, server: str, ca: Path, cert: Path, key: Path, context: str = "powercut-lab"
) -> None:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": context, "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [
            {"name": context, "user": {"client-certificate": str(cert), "client-key": str(key)}}
        ],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
        "current-context": context,
    }
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)


def etcd_argv(spec: LabSpec, cp: NodeSpec, etcd: str) -> list[str]:
    assert cp.cp_index is not None
    p = spec.ports
    cluster = ",".join(
        f"cp-{i + 1}=http://127.0.0.1:{p.etcd_peer(i)}" for i in range(spec.control_planes)
    )
    i = cp.cp_index
    return [
        etcd,
        f"--name=cp-{i + 1}",
        f"--data-dir={spec.root / 'etcd' / cp.name}",
        f"--listen-client-urls=http://127.0.0.1:{p.etcd_client(i)}",
        f"--advertise-client-urls=http://127.0.0.1:{p.etcd_client(i)}",
        f"--listen-peer-urls=http://127.0.0.1:{p.etcd_peer(i)}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{p.etcd_peer(i)}",
        f"--initial-cluster={cluster}",
        "--initial-cluster-state=new",
        "--initial-cluster-token=powercut-lab",
        # A lab on a shared disk: quorum and elections are real, durability is not needed.
        "--unsafe-no-fsync",
        "--log-level=warn",
    ]


def etcd_servers(spec: LabSpec, cp: NodeSpec) -> str:
    """The node's own etcd member only, as in kubeadm's stacked layout: an API server whose
    member is out of the quorum is not ready, so its /readyz shows the member rejoined."""
    assert cp.cp_index is not None
    return f"http://127.0.0.1:{spec.ports.etcd_client(cp.cp_index)}"


def apiserver_argv(spec: LabSpec, cp: NodeSpec, binary: str) -> list[str]:
    assert cp.cp_index is not None
    pki = spec.root / "pki"
    t = spec.timing
    return [
        binary,
        f"--etcd-servers={etcd_servers(spec, cp)}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={spec.ports.apiserver(cp.cp_index)}",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        "--service-account-issuer=https://kubernetes.default.svc",
        "--service-cluster-ip-range=10.96.0.0/16",
        "--authorization-mode=Node,RBAC",
        f"--default-not-ready-toleration-seconds={t.toleration_s}",
        f"--default-unreachable-toleration-seconds={t.toleration_s}",
        # external identities (``lab up --authentication-config``; never --oidc-*: the two
        # exclude each other), e.g. a management cluster's ServiceAccounts
        *(
            [f"--authentication-config={spec.authentication_config}"]
            * bool(spec.authentication_config)
        ),
        "--profiling=false",
        "--v=1",
    ]


def _leader_flags(spec: LabSpec) -> list[str]:
    t = spec.timing
    return [
        "--leader-elect=true",
        f"--leader-elect-lease-duration={t.leader_lease_s}s",
        f"--leader-elect-renew-deadline={t.leader_renew_s}s",
        f"--leader-elect-retry-period={t.leader_retry_s}s",
    ]


def controller_manager_argv(
    spec: LabSpec, cp: NodeSpec, binary: str, kubeconfig: Path
) -> list[str]:
    assert cp.cp_index is not None
    pki = spec.root / "pki"
    t = spec.timing
    return [
        binary,
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={spec.ports.controller_manager(cp.cp_index)}",
        f"--root-ca-file={pki / 'ca.crt'}",
        f"--service-account-private-key-file={pki / 'sa.key'}",
        "--use-service-account-credentials=false",
        # The lab writes each node's spec.podCIDR itself (a /24 of the cluster CIDR, by
        # index); the controller-manager is told the same plan but does not allocate.
        "--allocate-node-cidrs=false",
        f"--cluster-cidr={CLUSTER_CIDR}",
        f"--node-cidr-mask-size={NODE_CIDR_MASK}",
        f"--node-monitor-period={t.node_monitor_period_s}s",
        f"--node-monitor-grace-period={t.node_monitor_grace_s}s",
        *_leader_flags(spec),
        "--profiling=false",
        "--v=1",
    ]


def scheduler_argv(spec: LabSpec, cp: NodeSpec, binary: str, kubeconfig: Path) -> list[str]:
    assert cp.cp_index is not None
    return [
        binary,
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={spec.ports.scheduler(cp.cp_index)}",
        *_leader_flags(spec),
        "--profiling=false",
        "--v=1",
    ]


def haproxy_config(spec: LabSpec) -> str:
    p = spec.ports
    servers = "\n".join(
        f"  server cp-{i + 1} 127.0.0.1:{p.apiserver(i)} check check-ssl verify none "
        "inter 1s fall 2 rise 1"
        for i in range(spec.control_planes)
    )
    return f"""global
  maxconn 4096

defaults
  mode tcp
  retries 3
  option redispatch
  timeout connect 2s
  timeout client 1h
  timeout server 1h

frontend kube-apiserver
  bind 127.0.0.1:{p.cluster}
  default_backend kube-apiservers

backend kube-apiservers
  option httpchk GET /readyz
  http-check expect status 200
  balance roundrobin
  default-server on-marked-down shutdown-sessions
{servers}
"""


def kwok_argv(
    spec: LabSpec, node: NodeSpec, binary: str, kubeconfig: Path, stages: Path
) -> list[str]:
    return [
        binary,
        f"--kubeconfig={kubeconfig}",
        f"--config={stages}",
        f"--manage-single-node={node.name}",
        f"--node-lease-duration-seconds={spec.timing.node_lease_s}",
        f"--node-ip={node.node_ip}",
        f"--node-name={node.name}",
        f"--cidr={node.pod_cidr}",
    ]


#: Flags that set the cluster's timings, published for powercut's model (docs/budgets.md).
_PUBLISHED = (
    "node-monitor-period",
    "node-monitor-grace-period",
    "leader-elect-lease-duration",
    "leader-elect-retry-period",
    "default-not-ready-toleration-seconds",
    "default-unreachable-toleration-seconds",
)


def _published(argv: list[str]) -> list[dict[str, str]]:
    out = []
    for arg in argv:
        name, _, value = arg.removeprefix("--").partition("=")
        if name in _PUBLISHED:
            out.append({"name": name, "value": value})
    return out


def cluster_configuration(spec: LabSpec, cp: NodeSpec) -> dict[str, object]:
    """The ConfigMap ``kube-system/kubeadm-config`` as kubeadm writes it (ClusterConfiguration
    v1beta4, its ``extraArgs`` lists): the lab runs its control plane as processes, not
    static pods, so this is where a reader of the cluster (powercut's model) finds the
    timing flags its components really run with."""
    config = {
        "apiVersion": "kubeadm.k8s.io/v1beta4",
        "kind": "ClusterConfiguration",
        "clusterName": "powercut-lab",
        "controllerManager": {
            "extraArgs": _published(controller_manager_argv(spec, cp, "-", Path("-")))
        },
        "apiServer": {"extraArgs": _published(apiserver_argv(spec, cp, "-"))},
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kubeadm-config", "namespace": "kube-system"},
        "data": {"ClusterConfiguration": yaml.safe_dump(config, sort_keys=False)},
    }
