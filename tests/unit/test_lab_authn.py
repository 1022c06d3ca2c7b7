"""``powercut lab up --authentication-config FILE``: the lab's API servers trust another
issuer's JWTs (a management cluster's ServiceAccount tokens, docs/management.md). A bad
file is refused naming its field before anything is touched; a good one is copied into the
state directory and every API server is started with ``--authentication-config`` naming
the copy (never ``--oidc-*``: kube-apiserver refuses the two together)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.errors import ConfigError
from harness.lab import build
from harness.lab import cli as labcli
from harness.lab.controlplane import apiserver_argv
from harness.lab.spec import LAB_SA_ISSUER, LabSpec, check_authentication_config


def authn(**jwt: Any) -> dict[str, Any]:
    auth: dict[str, Any] = {
        "issuer": {
            "url": "https://kubernetes.default.svc.cluster.local",
            "discoveryURL": "https://127.0.0.1:31000/.well-known/openid-configuration",
            "certificateAuthority": "-----BEGIN CERTIFICATE-----\n...",
            "audiences": ["powercut-lab"],
        },
        "claimMappings": {"username": {"claim": "sub", "prefix": "mgmt:"}},
    }
    auth.update(jwt)
    return {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "AuthenticationConfiguration",
        "jwt": [auth],
    }


def write(tmp_path: Path, doc: Any) -> Path:
    path = tmp_path / "authn.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_a_good_file_is_read_as_it_is(tmp_path: Path) -> None:
    path = write(tmp_path, authn())
    assert check_authentication_config(path) == path.read_text()
    v1beta1 = {**authn(), "apiVersion": "apiserver.config.k8s.io/v1beta1"}
    assert check_authentication_config(write(tmp_path, v1beta1))


@pytest.mark.parametrize(
    ("doc", "field", "says"),
    [
        ({"kind": "Config"}, "kind", "valid: kind: AuthenticationConfiguration"),
        ({**authn(), "apiVersion": "v1"}, "apiVersion", "apiserver.config.k8s.io/v1"),
        (authn(issuer={"url": "http://x", "audiences": ["a"]}), "jwt[0].issuer.url", "https://"),
        (
            authn(issuer={"url": LAB_SA_ISSUER, "audiences": ["a"]}),
            "jwt[0].issuer.url",
            "the lab's own ServiceAccount issuer",
        ),
        (authn(issuer={"url": "https://x", "audiences": []}), "jwt[0].issuer.audiences", "a"),
        (authn(claimMappings={}), "jwt[0].claimMappings.username", "claim: sub"),
        ({**authn(), "jwt": {"issuer": {}}}, "jwt", "a list"),
    ],
)
def test_a_bad_file_names_the_field_and_what_is_valid(
    tmp_path: Path, doc: dict[str, Any], field: str, says: str
) -> None:
    path = write(tmp_path, doc)
    with pytest.raises(ConfigError) as caught:
        check_authentication_config(path)
    assert caught.value.field == field
    assert caught.value.source == str(path)
    assert says in str(caught.value)


def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read it"):
        check_authentication_config(tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("jwt: [")
    with pytest.raises(ConfigError, match="not YAML"):
        check_authentication_config(tmp_path / "bad.yaml")


def test_every_api_server_takes_the_copy_and_no_oidc_flag(tmp_path: Path) -> None:
    spec = LabSpec(state_dir=str(tmp_path), base_port=21000)
    cps = [n for n in spec.nodes() if n.role == "control-plane"]
    assert len(cps) == 3
    assert not [
        a for a in apiserver_argv(spec, cps[0], "kube-apiserver") if "authentication-config" in a
    ]
    spec.authentication_config = str(tmp_path / "authentication-config.yaml")
    for cp in cps:
        argv = apiserver_argv(spec, cp, "kube-apiserver")
        assert f"--authentication-config={spec.authentication_config}" in argv
        assert not [a for a in argv if a.startswith("--oidc-")]
    # kept in lab.json: the supervisor (and a restarted control plane) reads it from there
    spec.save()
    assert LabSpec.load(tmp_path).authentication_config == spec.authentication_config


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    labcli.add_parser(parser.add_subparsers(dest="cmd"))
    return parser.parse_args(["lab", *argv])


def test_lab_up_refuses_a_bad_file_before_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_build(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the lab's binaries were obtained before the file was checked")

    monkeypatch.setattr(build, "obtain", no_build)
    bad = write(tmp_path, authn(claimMappings={}))
    state = tmp_path / "lab"
    args = parse("up", "--state-dir", str(state), "--authentication-config", str(bad))
    with pytest.raises(ConfigError, match=r"claimMappings\.username"):
        args.func(args)
    assert not state.exists()
