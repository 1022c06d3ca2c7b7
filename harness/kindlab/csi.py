"""The kind cluster's attachable storage: powercut's CSI driver (``harness/kindlab/csi``)
with kubernetes-csi's external-provisioner and external-attacher, installed by ``kind up
--storage csi`` (its image built here and loaded into every node's containerd).

Volumes live on shared storage: one host directory (``KindSpec.shared_storage``) that every
node container has at ``SHARED_STORAGE_PATH``, as every server of a rack reaches a SAN. The
CSIDriver has ``attachRequired: true``, so each volume a pod uses gets a real
VolumeAttachment: the attach/detach controller creates it, the external-attacher calls the
driver's ControllerPublishVolume, which attaches the volume to that one node and refuses a
second (as an array refuses to map a LUN to two hosts); the node's kubelet then stages and
mounts it (NodeStageVolume only on the node it is attached to). A pod whose node lost
power cannot have its volume on another node until Kubernetes detaches it (the
out-of-service taint, or the attach/detach controller's 6-minute forced detach), and then
its data is there.

The data travels over the kind network: the node plugin mounts each volume with sshfs from
the storage server container (:mod:`harness.kindlab.netstorage`), in the node's own network
namespace (``hostNetwork``), so a node cut off its storage network loses its pods' I/O while
its kubelet goes on.

The node plugin registers itself with each kubelet (the plugin registration API of
node-driver-registrar, which the Go module proxy here does not serve).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.clock import SYSTEM_CLOCK
from harness.errors import PowercutError
from harness.kindlab import binaries, engine, images, netstorage
from harness.kindlab import versions as v
from harness.kindlab.spec import SHARED_STORAGE_PATH, KindSpec
from harness.kube.names import LABEL_CONTROL_PLANE, NO_SCHEDULE, TAINT_CONTROL_PLANE
from harness.lab.build import Say

DRIVER = "csi.powercut.io"
STORAGE_CLASS = "powercut-csi"
NAMESPACE = "powercut-csi"
KUBELET_DIR = "/var/lib/kubelet"
PLUGIN_DIR = f"{KUBELET_DIR}/plugins/{DRIVER}"
JSON = dict[str, Any]

_PROVISIONER_RULES: list[JSON] = [
    {
        "apiGroups": [""],
        "resources": ["persistentvolumes"],
        "verbs": ["get", "list", "watch", "create", "patch", "delete"],
    },
    {
        "apiGroups": [""],
        "resources": ["persistentvolumeclaims"],
        "verbs": ["get", "list", "watch", "update", "patch"],
    },
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
    {
        "apiGroups": [""],
        "resources": ["events"],
        "verbs": ["list", "watch", "create", "update", "patch"],
    },
    {
        "apiGroups": ["storage.k8s.io"],
        "resources": [
            "storageclasses",
            "csinodes",
            "volumeattachments",
            "volumeattributesclasses",
        ],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["snapshot.storage.k8s.io"],
        "resources": ["volumesnapshots", "volumesnapshotcontents"],
        "verbs": ["get", "list"],
    },
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["get", "watch", "list", "delete", "update", "create"],
    },
]
_ATTACHER_RULES: list[JSON] = [
    {
        "apiGroups": [""],
        "resources": ["persistentvolumes"],
        "verbs": ["get", "list", "watch", "patch"],
    },
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch", "update"]},
    {
        "apiGroups": ["storage.k8s.io"],
        "resources": ["csinodes", "volumeattributesclasses"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["storage.k8s.io"],
        "resources": ["volumeattachments"],
        "verbs": ["get", "list", "watch", "patch"],
    },
    {
        "apiGroups": ["storage.k8s.io"],
        "resources": ["volumeattachments/status"],
        "verbs": ["patch"],
    },
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["get", "watch", "list", "delete", "update", "create"],
    },
]


def _host(name: str, path: str, kind: str) -> JSON:
    return {"name": name, "hostPath": {"path": path, "type": kind}}


def ensure_image(say: Say) -> str:
    """The storage's image (the three static binaries on the storage's Debian userland,
    which has sshfs: :mod:`harness.kindlab.netstorage`), built when its binaries or its
    base changed; returns its reference."""
    bins = binaries.obtain_csi(say)
    base = netstorage.ensure_base_image(say)
    inputs = (
        "".join(f"{n}={p}" for n, p in sorted(bins.items())) + f"{base}={images.image_key(base)}"
    )
    key = hashlib.sha256(inputs.encode()).hexdigest()[:16]
    ref = images.CSI_IMAGE
    if images.image_key(ref) == key:
        return ref
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="img-", dir=v.kind_cache()) as d:
        ctx = Path(d)
        for name in ("pcsi", "csi-attacher", "csi-provisioner"):
            shutil.copy2(bins[name], ctx / name)
        images._docker_build(
            ref,
            ctx,
            f"FROM {base}\nCOPY pcsi csi-attacher csi-provisioner /usr/local/bin/\n",
            key,
        )
    say(f"  image {ref} in {time.monotonic() - t0:.1f}s")
    return ref


def load_image(spec: KindSpec, say: Say) -> None:
    """Import the storage's image into every node's containerd (as ``kind load``)."""
    docker = engine.docker_cli()
    for node in spec.nodes():
        save = subprocess.Popen([docker, "save", images.CSI_IMAGE], stdout=subprocess.PIPE)
        imp = subprocess.run(
            [docker, "exec", "-i", node.name, "ctr", "--namespace=k8s.io", "images", "import",
             "--label=io.cri-containerd.pinned=pinned", "--digests", "-"],
            stdin=save.stdout, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert save.stdout is not None
        save.stdout.close()
        if save.wait() != 0 or imp.returncode != 0:
            raise PowercutError(
                f"loading {images.CSI_IMAGE} into {node.name}: {imp.stderr.strip()[-800:]}"
            )
    say(f"  {images.CSI_IMAGE} loaded into {len(spec.nodes())} nodes")


def _container(name: str, binary: str, args: list[str], mounts: list[JSON]) -> JSON:
    return {
        "name": name,
        "image": images.CSI_IMAGE,
        "imagePullPolicy": "Never",  # in the node's containerd
        "command": [f"/usr/local/bin/{binary}"],
        "args": args,
        "volumeMounts": mounts,
        "resources": {"requests": {"cpu": "5m", "memory": "16Mi"}},
    }


def manifests(sshfs: str | None = None) -> list[tuple[str, JSON]]:
    """(API path, object) of every object of the storage, in the order to apply them.
    ``sshfs``: where the node plugin mounts each volume from over the network
    (:func:`harness.kindlab.netstorage.sshfs_source`); None: a bind mount of the shared
    directory."""
    sa = "pcsi-controller"
    ns_path = f"/api/v1/namespaces/{NAMESPACE}"
    sock = "unix:///csi/csi.sock"
    shared = {"name": "shared", "mountPath": SHARED_STORAGE_PATH}
    socket_dir = {"name": "socket-dir", "mountPath": "/csi"}
    out: list[tuple[str, JSON]] = [
        (ns_path, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
        (
            f"{ns_path}/serviceaccounts/{sa}",
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": sa, "namespace": NAMESPACE},
            },
        ),
    ]
    for role, rules in (
        ("pcsi-provisioner", _PROVISIONER_RULES),
        ("pcsi-attacher", _ATTACHER_RULES),
    ):
        rbac = "/apis/rbac.authorization.k8s.io/v1"
        out.append(
            (
                f"{rbac}/clusterroles/{role}",
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRole",
                    "metadata": {"name": role},
                    "rules": rules,
                },
            )
        )
        out.append(
            (
                f"{rbac}/clusterrolebindings/{role}",
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRoleBinding",
                    "metadata": {"name": role},
                    "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": NAMESPACE}],
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": role,
                    },
                },
            )
        )
    out.append(
        (
            f"/apis/storage.k8s.io/v1/csidrivers/{DRIVER}",
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "CSIDriver",
                "metadata": {"name": DRIVER},
                "spec": {
                    "attachRequired": True,
                    "podInfoOnMount": False,
                    "fsGroupPolicy": "None",
                    "volumeLifecycleModes": ["Persistent"],
                },
            },
        )
    )
    out.append(
        (
            f"/apis/storage.k8s.io/v1/storageclasses/{STORAGE_CLASS}",
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": STORAGE_CLASS},
                "provisioner": DRIVER,
                "reclaimPolicy": "Delete",
                "volumeBindingMode": "WaitForFirstConsumer",
            },
        )
    )
    out.append(
        (
            f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/pcsi-controller",
            _controller(sa, sock, shared, socket_dir),
        )
    )
    out.append(
        (
            f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets/pcsi-node",
            _node_plugin(sock, shared, socket_dir, sshfs),
        )
    )
    return out


def _controller(sa: str, sock: str, shared: JSON, socket_dir: JSON) -> JSON:
    """The controller: the driver in controller mode, the provisioner and the attacher."""
    controller = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "pcsi-controller", "namespace": NAMESPACE},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": {"app": "pcsi-controller"}},
            "template": {
                "metadata": {"labels": {"app": "pcsi-controller"}},
                "spec": {
                    "serviceAccountName": sa,
                    "priorityClassName": "system-cluster-critical",
                    # On a control-plane node: a worker's power loss leaves the storage's
                    # controller running, as an array's controller is not on a worker.
                    "nodeSelector": {LABEL_CONTROL_PLANE: ""},
                    "tolerations": [{"key": TAINT_CONTROL_PLANE, "effect": NO_SCHEDULE}],
                    "containers": [
                        _container(
                            "driver",
                            "pcsi",
                            [
                                "--mode=controller",
                                f"--endpoint={sock}",
                                f"--root={SHARED_STORAGE_PATH}",
                            ],
                            [socket_dir, shared],
                        ),
                        _container(
                            "csi-provisioner",
                            "csi-provisioner",
                            ["--csi-address=/csi/csi.sock", "--timeout=30s", "--v=2"],
                            [socket_dir],
                        ),
                        _container(
                            "csi-attacher",
                            "csi-attacher",
                            ["--csi-address=/csi/csi.sock", "--timeout=30s", "--v=2"],
                            [socket_dir],
                        ),
                    ],
                    "volumes": [
                        {"name": "socket-dir", "emptyDir": {}},
                        _host("shared", SHARED_STORAGE_PATH, "Directory"),
                    ],
                },
            },
        },
    }
    return controller


def _node_plugin(sock: str, shared: JSON, socket_dir: JSON, sshfs: str | None) -> JSON:
    """The node plugin on every node, registered with its kubelet."""
    node_container = _container(
        "driver",
        "pcsi",
        [
            "--mode=node",
            f"--endpoint={sock}",
            f"--root={SHARED_STORAGE_PATH}",
            "--node-id=$(NODE_NAME)",
            "--registration-dir=/registration",
            f"--kubelet-endpoint={PLUGIN_DIR}/csi.sock",
        ],
        [
            socket_dir,
            shared,
            {"name": "registration", "mountPath": "/registration"},
            {
                "name": "kubelet-dir",
                "mountPath": KUBELET_DIR,
                "mountPropagation": "Bidirectional",  # its mounts reach the kubelet and pods
            },
        ],
    )
    if sshfs is not None:
        node_container["args"] += [f"--sshfs={sshfs}", f"--ssh-dir={netstorage.SSH_DIR}"]
        node_container["volumeMounts"].append(
            {"name": "ssh", "mountPath": netstorage.SSH_DIR, "readOnly": True}
        )
    node_container["securityContext"] = {"privileged": True}
    node_container["env"] = [
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
    ]
    node_plugin = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "pcsi-node", "namespace": NAMESPACE},
        "spec": {
            "selector": {"matchLabels": {"app": "pcsi-node"}},
            "template": {
                "metadata": {"labels": {"app": "pcsi-node"}},
                "spec": {
                    "priorityClassName": "system-node-critical",
                    "tolerations": [{"operator": "Exists"}],
                    # The node's own network namespace, as an iSCSI or NFS client's: a cut
                    # of the node's storage network cuts its mounts.
                    "hostNetwork": True,
                    "containers": [node_container],
                    "volumes": [
                        _host("socket-dir", PLUGIN_DIR, "DirectoryOrCreate"),
                        _host("registration", f"{KUBELET_DIR}/plugins_registry", "Directory"),
                        _host("kubelet-dir", KUBELET_DIR, "Directory"),
                        _host("shared", SHARED_STORAGE_PATH, "Directory"),
                        *(
                            []
                            if sshfs is None
                            else [
                                {
                                    "name": "ssh",
                                    "secret": {
                                        "secretName": netstorage.PLUGIN_KEYS,
                                        "defaultMode": 0o400,
                                    },
                                }
                            ]
                        ),
                    ],
                },
            },
        },
    }
    return node_plugin


def install(spec: KindSpec, say: Say, *, timeout_s: float = 240) -> float:
    """Apply the storage's objects and wait until the controller runs and every node's
    kubelet registered the driver (its CSINode lists it); returns the seconds it took."""
    from harness.kube.client import KubeClient

    t0 = time.monotonic()
    load_image(spec, say)
    addr = netstorage.start(spec, say)
    c = KubeClient.from_kubeconfig(spec.kubeconfig, timeout_s=10)
    try:
        objects = manifests(netstorage.sshfs_source(addr))
        secret = netstorage.secret(spec, NAMESPACE)
        objects.insert(
            1, (f"/api/v1/namespaces/{NAMESPACE}/secrets/{netstorage.PLUGIN_KEYS}", secret)
        )
        for path, obj in objects:
            c.apply(path, obj)
        want = {n.name for n in spec.nodes()}
        pending = "nothing seen yet"
        while time.monotonic() - t0 < timeout_s:
            ctl = c.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/pcsi-controller")
            ready = (ctl.get("status") or {}).get("readyReplicas", 0)
            items, _ = c.list("/apis/storage.k8s.io/v1/csinodes")
            registered = {
                i["metadata"]["name"]
                for i in items
                if any(d.get("name") == DRIVER for d in (i.get("spec") or {}).get("drivers") or [])
            }
            missing = sorted(want - registered)
            if ready >= 1 and not missing:
                took = time.monotonic() - t0
                say(f"  storage: {DRIVER} on {len(want)} nodes in {took:.0f}s")
                return took
            pending = f"controller ready {ready}/1, not registered on: {', '.join(missing) or '-'}"
            SYSTEM_CLOCK.sleep(2)
        raise PowercutError(
            f"the CSI driver {DRIVER} not ready after {timeout_s:.0f}s: {pending}; "
            f"`kubectl -n {NAMESPACE} logs` of pcsi-controller and pcsi-node say why"
        )
    finally:
        c.close()
