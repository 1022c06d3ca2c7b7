"""`powercut inventory discover` against the lab's real API server: nodes, roles, racks, and
BMCs from a Metal3 BareMetalHost (its CRD installed here) and from the node annotation."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.inventory import load_inventory
from harness.kube.client import KubeClient
from tests.lab.conftest import LabHandle, powercut, wait_for

pytestmark = [pytest.mark.lab]

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "baremetalhosts.metal3.io"},
    "spec": {
        "group": "metal3.io",
        "names": {
            "kind": "BareMetalHost",
            "listKind": "BareMetalHostList",
            "plural": "baremetalhosts",
            "singular": "baremetalhost",
            "shortNames": ["bmh"],
        },
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
BMH_NS = "default"
BMH_PATH = f"/apis/metal3.io/v1alpha1/namespaces/{BMH_NS}/baremetalhosts"
ANNOTATION = "powercut.io/bmc"


@pytest.fixture
def metal3(lab: LabHandle) -> Iterator[tuple[str, str]]:
    """A BareMetalHost for the first worker, the annotation on the second; both removed."""
    client: KubeClient = lab.client
    workers = [n.name for n in lab.inventory.nodes if n.role == "worker"]
    by_host, by_annotation = workers[0], workers[1]
    client.create(CRD_PATH, CRD)
    try:
        wait_for(
            "the BareMetalHost CRD to be served",
            lambda: client.get_or_none("/apis/metal3.io/v1alpha1/baremetalhosts") is not None,
            60,
        )
        host = {
            "apiVersion": "metal3.io/v1alpha1",
            "kind": "BareMetalHost",
            "metadata": {"name": by_host, "namespace": BMH_NS},
            "spec": {
                "online": True,
                "bmc": {
                    "address": "redfish+http://127.0.0.1:8000/redfish/v1/Systems/sys-1",
                    "credentialsName": f"{by_host}-bmc-secret",
                    "disableCertificateVerification": True,
                },
            },
        }
        wait_for("the host to be created", lambda: client.create(BMH_PATH, host), 30)

        def served_by_every_api_server() -> bool:
            # Behind the load balancer each API server initialises the CRD's storage on
            # its own (429 meanwhile): several lists in a row must all see the host.
            for _ in range(6):
                items = client.get("/apis/metal3.io/v1alpha1/baremetalhosts")["items"]
                if by_host not in [i["metadata"]["name"] for i in items]:
                    return False
            return True

        wait_for("every API server to serve the host", served_by_every_api_server, 60)
        client.patch(
            f"/api/v1/nodes/{by_annotation}",
            {"metadata": {"annotations": {ANNOTATION: "ipmi://127.0.0.1:6230"}}},
        )
        yield by_host, by_annotation
    finally:
        client.patch(
            f"/api/v1/nodes/{by_annotation}", {"metadata": {"annotations": {ANNOTATION: None}}}
        )
        client.delete(f"{CRD_PATH}/baremetalhosts.metal3.io")


def test_discover_writes_an_inventory_that_loads_with_roles_racks_and_bmcs(
    lab: LabHandle, metal3: tuple[str, str], tmp_path: Path
) -> None:
    by_host, by_annotation = metal3
    out = tmp_path / "discovered.yaml"
    started = time.monotonic()
    result = powercut(
        "inventory",
        "discover",
        "-o",
        str(out),
        "--kubeconfig",
        str(lab.inventory.cluster.kubeconfig),
        "--name",
        "lab",
    )
    took = time.monotonic() - started
    print(result.stdout, f"discover took {took:.2f}s")
    inv = load_inventory(out)
    lab_nodes = {n.name: n for n in lab.inventory.nodes}
    assert sorted(inv.node_names()) == sorted(lab_nodes)
    for node in inv.nodes:
        assert node.role == lab_nodes[node.name].role, node.name
        assert node.rack == lab_nodes[node.name].rack, node.name  # the zone label
    host = inv.node(by_host).power
    assert (host.driver, host.endpoint, host.system_id, host.verify_tls) == (
        "redfish",
        "http://127.0.0.1:8000",
        "sys-1",
        False,
    )
    assert (inv.node(by_annotation).power.driver, inv.node(by_annotation).power.endpoint) == (
        "ipmi",
        "127.0.0.1:6230",
    )
    others = [n for n in inv.nodes if n.name not in (by_host, by_annotation)]
    assert all(n.power.endpoint == f"{n.name}.bmc.invalid:623" for n in others)
    text = out.read_text()
    assert f"# credentials: Secret {BMH_NS}/{by_host}-bmc-secret" in text
    assert f"BareMetalHost {BMH_NS}/{by_host}" in result.stdout
    assert "password:" not in text  # credentials stay references
