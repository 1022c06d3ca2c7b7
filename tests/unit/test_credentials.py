"""Credentials as kubectl resolves them: every kubeconfig form the harness accepts.

Exec plugins run through a recording runner (plus one real script), token files and expiry
on a fake clock, 401 and 403 against a small HTTP server on 127.0.0.1 that checks the bearer
token. ``tests/lab/test_credentials_lab.py`` compares the same forms with kubectl's own
reading (``kubectl auth whoami``, ``kubectl config view --minify``).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import stat
import threading
from collections.abc import Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.errors import ConfigError
from harness.kube.client import Forbidden, KubeClient, Unauthorized
from harness.kube.credentials import CredentialError, ExecPlugin, TokenFile
from harness.kube.kubeconfig import in_cluster_credentials, load_kubeconfig
from tests.fakes.clock import FakeClock
from tests.unit.test_kubeconfig import self_signed

V1 = "client.authentication.k8s.io/v1"


def write(path: Path, doc: Mapping[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(dict(doc)))
    return path


def config(
    user: Mapping[str, Any],
    *,
    cluster: Mapping[str, Any] | None = None,
    server: str = "https://127.0.0.1:6443",
    name: str = "c",
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": name,
        "contexts": [{"name": name, "context": {"cluster": f"{name}-k", "user": f"{name}-u"}}],
        "clusters": [{"name": f"{name}-k", "cluster": {"server": server, **(cluster or {})}}],
        "users": [{"name": f"{name}-u", "user": dict(user)}],
    }


def iso(posix: float) -> str:
    return dt.datetime.fromtimestamp(posix, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Runner:
    """Stands for the plugin: records each call, answers the next token."""

    def __init__(self, clock: FakeClock, lifetime_s: float | None = 600.0, **status: Any) -> None:
        self.clock = clock
        self.lifetime_s = lifetime_s
        self.status = status
        self.calls: list[tuple[list[str], dict[str, str]]] = []

    def __call__(
        self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float
    ) -> tuple[int, str, str]:
        self.calls.append((list(argv), dict(env)))
        status: dict[str, Any] = {"token": f"t{len(self.calls)}", **self.status}
        if self.lifetime_s is not None:
            status["expirationTimestamp"] = iso(self.clock.time() + self.lifetime_s)
        return 0, json.dumps({"apiVersion": V1, "kind": "ExecCredential", "status": status}), ""


def exec_user(**extra: Any) -> dict[str, Any]:
    return {"exec": {"apiVersion": V1, "command": "sh", "interactiveMode": "Never", **extra}}


def plugin_of(
    path: Path, clock: FakeClock, runner: Runner, context: str | None = None
) -> ExecPlugin:
    creds = load_kubeconfig(path, context, clock=clock)
    assert isinstance(creds.auth, ExecPlugin)
    creds.auth.runner = runner
    return creds.auth


# -- exec plugins -------------------------------------------------------------------------------


def test_exec_plugin_gets_its_args_env_and_exec_info(tmp_path: Path) -> None:
    ca, _ = self_signed("ca")
    clock = FakeClock()
    path = write(
        tmp_path / "kc",
        config(
            exec_user(
                args=["token", "--cluster", "prod"],
                env=[{"name": "AWS_PROFILE", "value": "ops"}],
                provideClusterInfo=True,
            ),
            cluster={
                "certificate-authority-data": base64.b64encode(ca).decode(),
                "tls-server-name": "api.internal",
                "extensions": [
                    {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "x"}}
                ],
            },
        ),
    )
    runner = Runner(clock)
    auth = plugin_of(path, clock, runner).current()
    assert auth.header == "Bearer t1"
    argv, env = runner.calls[0]
    assert argv == ["sh", "token", "--cluster", "prod"]
    assert env["AWS_PROFILE"] == "ops"
    info = json.loads(env["KUBERNETES_EXEC_INFO"])
    assert info["apiVersion"] == V1 and info["kind"] == "ExecCredential"
    assert info["spec"]["interactive"] is False
    cluster = info["spec"]["cluster"]
    assert cluster["server"] == "https://127.0.0.1:6443"
    assert cluster["tls-server-name"] == "api.internal"
    assert base64.b64decode(cluster["certificate-authority-data"]) == ca
    assert cluster["config"] == {"audience": "x"}


def test_without_provide_cluster_info_the_plugin_gets_no_cluster(tmp_path: Path) -> None:
    clock = FakeClock()
    runner = Runner(clock)
    plugin_of(write(tmp_path / "kc", config(exec_user())), clock, runner).current()
    assert "cluster" not in json.loads(runner.calls[0][1]["KUBERNETES_EXEC_INFO"])["spec"]


def test_the_credential_is_cached_until_shortly_before_it_lapses(tmp_path: Path) -> None:
    clock = FakeClock()
    runner = Runner(clock, lifetime_s=600)
    plugin = plugin_of(write(tmp_path / "kc", config(exec_user())), clock, runner)
    assert plugin.current().header == "Bearer t1"
    clock.advance(530)  # renewed 60 s before the end of a 10-minute credential
    assert plugin.current().header == "Bearer t1"
    assert len(runner.calls) == 1
    clock.advance(15)
    assert plugin.current().header == "Bearer t2"
    assert plugin.calls == 2


def test_a_short_credential_is_renewed_a_tenth_of_its_life_early(tmp_path: Path) -> None:
    clock = FakeClock()
    runner = Runner(clock, lifetime_s=100)
    plugin = plugin_of(write(tmp_path / "kc", config(exec_user())), clock, runner)
    plugin.current()
    clock.advance(89)
    assert plugin.current().header == "Bearer t1"
    clock.advance(2)
    assert plugin.current().header == "Bearer t2"


def test_without_expiry_the_credential_is_kept_until_refused(tmp_path: Path) -> None:
    clock = FakeClock()
    runner = Runner(clock, lifetime_s=None)
    plugin = plugin_of(write(tmp_path / "kc", config(exec_user())), clock, runner)
    plugin.current()
    clock.advance(86_400)
    assert plugin.current().header == "Bearer t1"
    plugin.invalidate()
    assert plugin.current().header == "Bearer t2"


def test_a_missing_plugin_says_how_to_install_it(tmp_path: Path) -> None:
    hint = "Install aws-iam-authenticator: https://example.invalid/install"
    path = write(
        tmp_path / "kc",
        config(exec_user(command="no-such-plugin-here", installHint=hint)),
    )
    with pytest.raises(CredentialError) as info:
        load_kubeconfig(path).auth.current()  # type: ignore[union-attr]
    text = str(info.value)
    assert "user 'c-u'" in text and "'no-such-plugin-here' was not found" in text
    assert hint in text


def test_a_failing_plugin_is_an_error_never_an_anonymous_request(tmp_path: Path) -> None:
    script = tmp_path / "fail.sh"
    script.write_text("#!/bin/sh\necho 'login expired: run sso login' >&2\nexit 3\n")
    script.chmod(0o755)
    path = write(tmp_path / "kc", config(exec_user(command="./fail.sh")))
    with pytest.raises(CredentialError) as info:
        KubeClient.from_kubeconfig(path)  # the constructor asks for the credential
    assert "exited with status 3: login expired: run sso login" in str(info.value)


def test_a_real_plugin_script_is_run_relative_to_its_kubeconfig(tmp_path: Path) -> None:
    cert, key = self_signed("plugin-user")
    script = tmp_path / "bin" / "cred.py"
    script.parent.mkdir()
    status = {"clientCertificateData": cert.decode(), "clientKeyData": key.decode()}
    script.write_text(
        "#!/usr/bin/env python3\nimport json, os, sys\n"
        "info = json.loads(os.environ['KUBERNETES_EXEC_INFO'])\n"
        "assert sys.stdin.read() == ''\n"  # no terminal: stdin is closed
        f"print(json.dumps({{'apiVersion': info['apiVersion'], 'kind': 'ExecCredential', "
        f"'status': {status!r}}}))\n"
    )
    script.chmod(0o755)
    path = write(
        tmp_path / "kc",
        config(exec_user(command="bin/cred.py"), cluster={"insecure-skip-tls-verify": True}),
    )
    creds = load_kubeconfig(path)
    assert isinstance(creds.auth, ExecPlugin)
    assert creds.auth.spec.command == str(script)
    auth = creds.auth.current()
    assert auth.header is None
    assert auth.cert_pem == cert and auth.key_pem == key
    KubeClient(creds).close()  # the client loads the plugin's certificate (in memory)


@pytest.mark.parametrize(
    ("exec_", "field", "says"),
    [
        (
            {"apiVersion": "client.authentication.k8s.io/v1alpha1", "command": "x"},
            "apiVersion",
            "valid: client.authentication.k8s.io/v1, client.authentication.k8s.io/v1beta1",
        ),
        ({"apiVersion": V1, "interactiveMode": "Never"}, "command", "missing"),
        ({"apiVersion": V1, "command": "x"}, "interactiveMode", "required by"),
        (
            {"apiVersion": V1, "command": "x", "interactiveMode": "Sometimes"},
            "interactiveMode",
            "valid: Never, IfAvailable, Always",
        ),
        (
            {"apiVersion": V1, "command": "x", "interactiveMode": "Never", "env": [{"name": "A"}]},
            "env[0]",
            "name and a value",
        ),
    ],
)
def test_a_bad_exec_section_names_the_field(
    tmp_path: Path, exec_: dict[str, Any], field: str, says: str
) -> None:
    path = write(tmp_path / "kc", config({"exec": exec_}))
    with pytest.raises(ConfigError) as info:
        load_kubeconfig(path)
    assert info.value.field == f"users[c-u].exec.{field}"
    assert says in str(info.value)


def test_v1beta1_may_leave_interactive_mode_out(tmp_path: Path) -> None:
    exec_ = {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "x"}
    creds = load_kubeconfig(write(tmp_path / "kc", config({"exec": exec_})))
    assert isinstance(creds.auth, ExecPlugin)
    assert creds.auth.spec.interactive_mode == "IfAvailable"


def test_interactive_mode_always_is_refused_before_the_plugin_runs(tmp_path: Path) -> None:
    clock = FakeClock()
    runner = Runner(clock)
    plugin = plugin_of(
        write(tmp_path / "kc", config(exec_user(interactiveMode="Always"))), clock, runner
    )
    with pytest.raises(CredentialError, match="needs a terminal"):
        plugin.current()
    assert runner.calls == []


def test_a_plugin_answering_another_api_version_is_refused(tmp_path: Path) -> None:
    clock = FakeClock()

    def runner(argv: Sequence[str], env: Mapping[str, str], t: float) -> tuple[int, str, str]:
        doc = {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "kind": "ExecCredential",
            "status": {"token": "x"},
        }
        return 0, json.dumps(doc), ""

    creds = load_kubeconfig(write(tmp_path / "kc", config(exec_user())), clock=clock)
    assert isinstance(creds.auth, ExecPlugin)
    creds.auth.runner = runner
    with pytest.raises(CredentialError, match="answered apiVersion"):
        creds.auth.current()


# -- token files, in-cluster --------------------------------------------------------------------


def test_a_token_file_is_read_again_every_minute(tmp_path: Path) -> None:
    clock = FakeClock()
    (tmp_path / "token").write_text("one\n")
    creds = load_kubeconfig(write(tmp_path / "kc", config({"tokenFile": "token"})), clock=clock)
    assert isinstance(creds.auth, TokenFile)
    assert creds.auth.current().header == "Bearer one"
    (tmp_path / "token").write_text("two\n")
    clock.advance(59)
    assert creds.auth.current().header == "Bearer one"
    clock.advance(1)
    assert creds.auth.current().header == "Bearer two"


def _kubelet_writes(volume: Path, stamp: str, token: str) -> None:
    """What the kubelet's atomic writer does to a projected volume: the files in a new
    timestamped directory, ``..data`` swapped to it in one rename, the old directory
    removed; the file a pod reads, ``token``, is a link to ``..data/token``."""
    new = volume / f"..{stamp}"
    new.mkdir()
    (new / "token").write_text(token)
    data = volume / "..data"
    old = data.resolve() if data.is_symlink() else None
    (volume / "..data_tmp").symlink_to(new.name)
    os.replace(volume / "..data_tmp", data)
    if not (volume / "token").is_symlink():
        (volume / "token").symlink_to("..data/token")
    if old is not None:
        (old / "token").unlink()
        old.rmdir()


def test_a_projected_token_file_is_followed_across_the_kubelets_swaps(tmp_path: Path) -> None:
    """A ``tokenFile`` naming a projected ServiceAccount token (the chart's runner: a token
    of the management cluster, rotated by the kubelet) is read through its links each time:
    after the kubelet's swap, the old timestamped directory is gone and the new token is
    read, as client-go does (it never resolves the links once)."""
    volume = tmp_path / "projected"
    volume.mkdir()
    _kubelet_writes(volume, "2026_11_28_08_00_00.1", "first")
    clock = FakeClock()
    kc = write(tmp_path / "kc", config({"tokenFile": str(volume / "token")}))
    creds = load_kubeconfig(kc, clock=clock)
    assert isinstance(creds.auth, TokenFile)
    assert creds.auth.current().header == "Bearer first"
    _kubelet_writes(volume, "2026_11_28_08_48_00.2", "rotated")
    assert not (volume / "..2026_11_28_08_00_00.1").exists()
    clock.advance(60)
    assert creds.auth.current().header == "Bearer rotated"
    assert creds.auth.reads == 2


def test_token_file_wins_over_token_as_in_client_go(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("from-file")
    creds = load_kubeconfig(
        write(tmp_path / "kc", config({"token": "inline", "tokenFile": "token"}))
    )
    assert creds.auth is not None and creds.auth.current().header == "Bearer from-file"


def test_in_cluster_reads_the_projected_token_as_the_kubelet_rotates_it(tmp_path: Path) -> None:
    ca, _ = self_signed("ca")
    (tmp_path / "token").write_text("first")
    (tmp_path / "ca.crt").write_bytes(ca)
    clock = FakeClock()
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    creds = in_cluster_credentials(sa_dir=tmp_path, environ=env, clock=clock)
    assert creds.server == "https://10.96.0.1:443"
    assert creds.ca_file == str(tmp_path / "ca.crt")
    assert creds.auth is not None and creds.auth.current().header == "Bearer first"
    (tmp_path / "token").write_text("rotated")
    clock.advance(60)
    assert creds.auth.current().header == "Bearer rotated"


def test_in_cluster_outside_a_pod_says_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not usable from inside a pod: Service host/port"):
        in_cluster_credentials(sa_dir=tmp_path, environ={})


# -- merging, contexts, entries -----------------------------------------------------------------


def test_several_files_merge_first_wins_and_paths_resolve_per_file(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "token").write_text("b-token")
    first = config({"token": "a-token"}, name="a")
    second = config({"tokenFile": "token"}, name="b")
    second["users"].append({"name": "a-u", "user": {"token": "shadowed"}})
    paths = [write(tmp_path / "a" / "kc", first), write(tmp_path / "b" / "kc", second)]
    joined = os.pathsep.join(str(p) for p in paths)
    assert load_kubeconfig(joined).token == "a-token"  # the first current-context, first user
    b = load_kubeconfig(joined, "b")
    assert b.auth is not None and b.auth.current().header == "Bearer b-token"
    assert load_kubeconfig([paths[1], paths[0]]).auth is not None  # now b's context leads


def test_missing_files_in_a_list_are_skipped_but_not_all(tmp_path: Path) -> None:
    real = write(tmp_path / "kc", config({"token": "t"}))
    assert load_kubeconfig(f"{tmp_path / 'none'}{os.pathsep}{real}").token == "t"
    with pytest.raises(ConfigError, match="none of these kubeconfig files exists"):
        load_kubeconfig(f"{tmp_path / 'x'}{os.pathsep}{tmp_path / 'y'}")


def test_an_unknown_context_lists_the_valid_ones(tmp_path: Path) -> None:
    path = write(tmp_path / "kc", config({"token": "t"}))
    with pytest.raises(
        ConfigError, match=r"context was not found for specified context: prod; valid: c$"
    ):
        load_kubeconfig(path, "prod")


def test_a_context_whose_user_is_missing_is_no_anonymous_request(tmp_path: Path) -> None:
    doc = config({"token": "t"})
    doc["contexts"][0]["context"]["user"] = "gone"
    with pytest.raises(ConfigError) as info:
        load_kubeconfig(write(tmp_path / "kc", doc))
    assert "user 'gone' of context 'c' not found; valid: c-u" in str(info.value)


@pytest.mark.parametrize(
    ("user", "field", "says"),
    [
        ({}, "users[c-u]", "no credentials"),
        ({"client-certificate": "c.crt"}, "users[c-u].client-key", "missing: client-key"),
        ({"token": "t", "username": "u", "password": "p"}, "users[c-u]", "only one is allowed"),
        (
            {"auth-provider": {"name": "gcp"}},
            "users[c-u].auth-provider.name",
            "gke-gcloud-auth-plugin",
        ),
        ({"auth-provider": {"name": "azure"}}, "users[c-u].auth-provider.name", "kubelogin"),
        (
            {"auth-provider": {"name": "oidc", "config": {"client-id": "k"}}},
            "users[c-u].auth-provider.config.id-token",
            "missing",
        ),
    ],
)
def test_an_unusable_user_names_the_entry_and_what_is_missing(
    tmp_path: Path, user: dict[str, Any], field: str, says: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_kubeconfig(write(tmp_path / "kc", config(user)))
    assert info.value.field == field
    assert says in str(info.value)


def test_proxy_url_and_tls_server_name_reach_the_client(tmp_path: Path) -> None:
    path = write(
        tmp_path / "kc",
        config(
            {"token": "t"},
            cluster={"proxy-url": "http://127.0.0.1:3128", "tls-server-name": "kubernetes"},
        ),
    )
    creds = load_kubeconfig(path)
    assert creds.proxy_url == "http://127.0.0.1:3128"
    assert creds.tls_server_name == "kubernetes"
    client = KubeClient(creds)
    assert type(client._pool).__name__ == "ProxyManager"
    assert client._pool.connection_pool_kw["server_hostname"] == "kubernetes"


def test_a_socks_proxy_is_refused_by_name(tmp_path: Path) -> None:
    path = write(tmp_path / "kc", config({"token": "t"}, cluster={"proxy-url": "socks5://h:1"}))
    with pytest.raises(ConfigError, match="valid: http://, https://"):
        load_kubeconfig(path)


def test_basic_auth(tmp_path: Path) -> None:
    creds = load_kubeconfig(write(tmp_path / "kc", config({"username": "a", "password": "b"})))
    assert (
        KubeClient(creds)._headers["Authorization"] == "Basic " + base64.b64encode(b"a:b").decode()
    )


# -- OIDC ---------------------------------------------------------------------------------------


def jwt(exp: float) -> str:
    def part(d: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part({'exp': int(exp), 'sub': 'me'})}.c2ln"


def oidc_user(token: str) -> dict[str, Any]:
    return {
        "auth-provider": {
            "name": "oidc",
            "config": {
                "id-token": token,
                "refresh-token": "r1",
                "idp-issuer-url": "https://idp.example.invalid",
                "client-id": "kube",
                "client-secret": "s",
            },
        }
    }


def test_oidc_uses_a_valid_id_token_without_refreshing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubernetes.config.kube_config import KubeConfigLoader

    def no_refresh(self: Any, provider: Any) -> None:
        raise AssertionError("refreshed a valid token")

    monkeypatch.setattr(KubeConfigLoader, "_refresh_oidc", no_refresh)
    token = jwt(dt.datetime.now(dt.UTC).timestamp() + 3600)
    creds = load_kubeconfig(write(tmp_path / "kc", config(oidc_user(token))))
    assert creds.auth is not None and creds.auth.current().header == f"Bearer {token}"


def test_an_expired_oidc_token_is_refreshed_verified_and_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubernetes.config.kube_config import KubeConfigLoader

    fresh = jwt(dt.datetime.now(dt.UTC).timestamp() + 3600)
    seen: list[str] = []

    def refresh(self: Any, provider: Any) -> None:
        # what the loader's refresh verifies the IdP with: the system's roots, never none
        seen.append(provider["config"]["idp-certificate-authority"])
        provider["config"].value["id-token"] = fresh
        provider["config"].value["refresh-token"] = "r2"

    monkeypatch.setattr(KubeConfigLoader, "_refresh_oidc", refresh)
    path = write(tmp_path / "kc", config(oidc_user(jwt(1_000_000))))
    creds = load_kubeconfig(path)
    assert creds.auth is not None and creds.auth.current().header == f"Bearer {fresh}"
    assert len(seen) == 1 and Path(seen[0]).is_file()
    saved = yaml.safe_load(path.read_text())["users"][0]["user"]["auth-provider"]["config"]
    assert saved["id-token"] == fresh and saved["refresh-token"] == "r2"  # as kubectl persists
    assert "idp-certificate-authority" not in saved


# -- 401 and 403 against a server -------------------------------------------------------------


class _Api(BaseHTTPRequestHandler):
    valid: set[str]
    seen: list[str]

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _answer(self) -> None:
        auth = self.headers.get("Authorization", "")
        self.seen.append(auth)
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        if auth.removeprefix("Bearer ") not in self.valid:
            self._send(401, {"kind": "Status", "code": 401, "reason": "Unauthorized"})
        elif self.path.endswith("/selfsubjectreviews"):
            info = {
                "username": "system:serviceaccount:kube-system:powercut",
                "groups": ["system:serviceaccounts", "system:authenticated"],
            }
            self._send(201, {"status": {"userInfo": info}})
        elif self.command == "PATCH":
            self._send(
                403,
                {
                    "kind": "Status",
                    "code": 403,
                    "reason": "Forbidden",
                    "message": 'nodes "n1" is forbidden',
                },
            )
        else:
            self._send(200, {"kind": "Node", "metadata": {"name": "n1"}})

    do_GET = do_POST = do_PATCH = _answer


@pytest.fixture
def api() -> Iterator[tuple[str, set[str], list[str]]]:
    valid: set[str] = set()
    seen: list[str] = []
    handler = type("H", (_Api,), {"valid": valid, "seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", valid, seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_401_fetches_the_credential_again_and_retries_once_counted(
    tmp_path: Path, api: tuple[str, set[str], list[str]]
) -> None:
    url, valid, seen = api
    clock = FakeClock()
    runner = Runner(clock, lifetime_s=3600)
    path = write(tmp_path / "kc", config(exec_user(), server=url))
    creds = load_kubeconfig(path, clock=clock)
    assert isinstance(creds.auth, ExecPlugin)
    creds.auth.runner = runner
    valid.add("t1")
    client = KubeClient(creds)
    assert client.get("/api/v1/nodes/n1")["metadata"]["name"] == "n1"
    valid.clear()
    valid.add("t2")  # the server revoked t1 before its expiry
    watcher = client.clone()
    assert watcher.get("/api/v1/nodes/n1")["metadata"]["name"] == "n1"
    assert seen[-2:] == ["Bearer t1", "Bearer t2"]
    assert client.auth_stats.retries == 1 and watcher.auth_stats is client.auth_stats
    valid.clear()  # nothing the plugin gives is accepted: one retry, then the error
    with pytest.raises(Unauthorized) as info:
        client.get("/api/v1/nodes/n1")
    assert "did not accept powercut's credentials (user 'c-u' (exec plugin sh))" in str(info.value)
    assert client.auth_stats.retries == 2 and len(runner.calls) == 3


def test_a_static_token_refused_is_not_retried(
    tmp_path: Path, api: tuple[str, set[str], list[str]]
) -> None:
    url, _, seen = api
    client = KubeClient(load_kubeconfig(write(tmp_path / "kc", config({"token": "x"}, server=url))))
    with pytest.raises(Unauthorized):
        client.get("/api/v1/nodes/n1")
    assert seen == ["Bearer x"] and client.auth_stats.retries == 0


def test_a_403_names_the_identity_the_server_saw(
    tmp_path: Path, api: tuple[str, set[str], list[str]]
) -> None:
    url, valid, _ = api
    valid.add("sa")
    client = KubeClient(
        load_kubeconfig(write(tmp_path / "kc", config({"token": "sa"}, server=url)))
    )
    with pytest.raises(Forbidden) as info:
        client.patch("/api/v1/nodes/n1", {"spec": {"unschedulable": True}})
    text = str(info.value)
    assert "powercut's credentials (user 'c-u' (a token))" in text
    assert "sees as 'system:serviceaccount:kube-system:powercut'" in text
    assert "system:authenticated" in text
    assert "lack the permission patch on 'nodes' in the core API group" in text
    assert "sa" not in text.split("system:serviceaccount")[0].split("(")[0]  # no secret


def test_secrets_stay_out_of_the_credentials_repr(tmp_path: Path) -> None:
    creds = load_kubeconfig(write(tmp_path / "kc", config({"token": "s3cr3t-token"})))
    assert "s3cr3t" not in repr(creds)


def test_key_files_written_for_ssl_are_private(tmp_path: Path) -> None:
    # the plugin's key reaches ssl through a 0600 file in a 0700 directory, deleted at once
    cert, key = self_signed("u")
    seen: list[tuple[int, int]] = []
    import ssl

    original = ssl.SSLContext.load_cert_chain

    def spy(self: ssl.SSLContext, certfile: Any, keyfile: Any = None, password: Any = None) -> None:
        seen.append(
            (
                stat.S_IMODE(os.stat(keyfile).st_mode),
                stat.S_IMODE(os.stat(os.path.dirname(keyfile)).st_mode),
            )
        )
        original(self, certfile, keyfile, password)

    clock = FakeClock()
    runner = Runner(clock, clientCertificateData=cert.decode(), clientKeyData=key.decode())
    creds = load_kubeconfig(write(tmp_path / "kc", config(exec_user())), clock=clock)
    assert isinstance(creds.auth, ExecPlugin)
    creds.auth.runner = runner
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ssl.SSLContext, "load_cert_chain", spy)
        KubeClient(creds).close()
    assert seen == [(0o600, 0o700)]


def test_a_failed_early_renewal_keeps_the_credential_until_it_lapses(tmp_path: Path) -> None:
    clock = FakeClock()
    runner = Runner(clock, lifetime_s=600)
    plugin = plugin_of(write(tmp_path / "kc", config(exec_user())), clock, runner)
    assert plugin.current().header == "Bearer t1"

    def failing(argv: Sequence[str], env: Mapping[str, str], t: float) -> tuple[int, str, str]:
        return 1, "", "the identity provider is down"

    plugin.runner = failing
    clock.advance(570)  # inside the renewal margin, before the expiry
    assert plugin.current().header == "Bearer t1"
    clock.advance(30)  # lapsed: now the failure is the answer
    with pytest.raises(CredentialError, match="the identity provider is down"):
        plugin.current()


def test_a_file_and_its_data_both_given_is_refused_as_kubectl_does(tmp_path: Path) -> None:
    cert, _ = self_signed("ca")
    (tmp_path / "ca.crt").write_bytes(cert)
    cluster = {
        "certificate-authority": "ca.crt",
        "certificate-authority-data": base64.b64encode(cert).decode(),
    }
    path = write(tmp_path / "kc", config({"token": "t"}, cluster=cluster))
    with pytest.raises(ConfigError, match="both given") as info:
        load_kubeconfig(path)
    assert info.value.field == "clusters[c-k].certificate-authority"
