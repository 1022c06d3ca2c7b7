"""A kubeconfig resolved into :class:`Credentials` as kubectl resolves it.

The ``kubernetes`` package's config loader reads the files: several ``KUBECONFIG`` files
merged (:class:`KubeConfigMerger`: the first file to define a cluster, user or context
wins), the context chosen (``current-context`` or ``--context``), and the auth-provider
``oidc`` token refreshed. The rest is checked here, because the loader does not do it as
kubectl does:

- its merge takes ``current-context`` from the *last* file that sets one; kubectl takes the
  first;
- it resolves a user's relative certificate paths against the *cluster's* file; kubectl
  against the file the entry came from;
- a context whose user is missing, a user with no credentials and an exec plugin that fails
  all end, in the loader, in a request without credentials: here each is an error naming
  the file, the entry and what is missing (:class:`harness.errors.ConfigError`);
- its exec provider and client certificates do not fit an unattended run
  (:mod:`harness.kube.credentials` says why) and it writes embedded keys to temporary files
  kept until exit.

Python's ``ssl`` loads a client certificate and key only from files, so
:func:`load_client_cert` writes in-memory ones to a private temporary directory (mode 0700,
files 0600) just for that call and deletes them before it returns.

Where two forms of the same thing are given, kubectl is followed: a file and its ``*-data``
both is an error; ``tokenFile`` (re-read every minute) wins over ``token``.
"""

from __future__ import annotations

import base64
import logging
import os
import shutil
import ssl
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.clock import SYSTEM_CLOCK, Clock
from harness.errors import ConfigError
from harness.kube.credentials import AuthSource, ExecPlugin, LoaderToken, TokenFile, exec_spec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Credentials:
    """How to reach and authenticate to one API server.

    Each of the CA bundle, client certificate and client key is a file (``*_file``) or,
    from a kubeconfig's ``*-data`` fields, PEM bytes kept in memory (``*_data``). ``token``
    and the certificate are static; ``auth``, when set, supplies what changes.
    """

    server: str
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    token: str | None = field(default=None, repr=False)
    insecure: bool = False
    ca_data: bytes | None = field(default=None, repr=False)
    cert_data: bytes | None = field(default=None, repr=False)
    key_data: bytes | None = field(default=None, repr=False)
    #: credentials that change (exec plugin, token file, OIDC); asked before each request
    auth: AuthSource | None = field(default=None, repr=False, compare=False)
    #: the name the server's certificate is checked against, when not the server's host
    tls_server_name: str | None = None
    #: an HTTP(S) proxy every request goes through
    proxy_url: str | None = None
    #: who these credentials are, for messages: the kubeconfig user and how it signs in
    describe: str = ""


def _decode(data_b64: str, source: str, field_name: str) -> bytes:
    try:
        return base64.b64decode(data_b64, validate=True)
    except (ValueError, TypeError):
        raise ConfigError("is not valid base64", source=source, field=field_name) from None


def _write_private(directory: Path, name: str, data: bytes) -> str:
    """Write ``data`` to a new file readable by this user only (0600 from creation on)."""
    path = directory / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return str(path)


def load_client_cert(ctx: ssl.SSLContext, creds: Credentials) -> None:
    """Load the client certificate and key, from files or from memory."""
    if not (creds.cert_file or creds.cert_data) or not (creds.key_file or creds.key_data):
        return
    if creds.cert_data is None and creds.key_data is None:
        assert creds.cert_file is not None and creds.key_file is not None
        ctx.load_cert_chain(creds.cert_file, creds.key_file)
        return
    directory = Path(tempfile.mkdtemp(prefix="powercut-kc-"))  # mode 0700
    try:
        cert = creds.cert_file
        if creds.cert_data is not None:
            cert = _write_private(directory, "client.crt", creds.cert_data)
        key = creds.key_file
        if creds.key_data is not None:
            key = _write_private(directory, "client.key", creds.key_data)
        assert cert is not None and key is not None
        ctx.load_cert_chain(cert, key)
    finally:
        try:
            shutil.rmtree(directory)
        except OSError as exc:
            log.warning("could not delete the client key copy in %s: %s", directory, exc)


#: auth-providers kubectl no longer has, and what replaced them
_REMOVED_PROVIDERS = {
    "gcp": "kubectl removed it in 1.26: use the exec plugin gke-gcloud-auth-plugin",
    "azure": "kubectl removed it in 1.26: use the exec plugin kubelogin (convert-kubeconfig)",
}


def kubeconfig_paths(path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[Path]:
    """The files a kubeconfig argument names: one path, a list, or a ``KUBECONFIG``-style
    string of paths joined by ``os.pathsep``."""
    if isinstance(path, (str, os.PathLike)):
        parts = [p for p in os.fspath(path).split(os.pathsep) if p]
    else:
        parts = [os.fspath(p) for p in path]
    return [Path(p).expanduser() for p in parts]


def _merged(paths: list[Path]) -> tuple[Any, str | None]:
    """The files merged by the ``kubernetes`` package (first definition of a name wins) and
    the current context as kubectl picks it (the first file that sets one)."""
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.config.kube_config import KubeConfigMerger

    present = [p for p in paths if p.exists()]
    shown = os.pathsep.join(str(p) for p in paths)
    if len(paths) == 1 and not present:
        raise ConfigError("cannot read kubeconfig: No such file or directory", source=shown)
    if not present:
        raise ConfigError("none of these kubeconfig files exists", source=shown)
    for p in present:  # each file on its own first: errors name the file
        try:
            doc = yaml.safe_load(p.read_text())
        except OSError as exc:
            raise ConfigError(f"cannot read kubeconfig: {exc.strerror}", source=str(p)) from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"not valid YAML: {exc}", source=str(p)) from None
        if not isinstance(doc, dict):
            raise ConfigError("not a kubeconfig (expected a mapping)", source=str(p))
    try:
        merger = KubeConfigMerger(os.pathsep.join(str(p) for p in present))  # type: ignore[no-untyped-call]
    except (ConfigException, KeyError, TypeError) as exc:
        raise ConfigError(f"cannot merge: {exc}", source=shown) from None
    current = next(
        (
            c.get("current-context")
            for c in merger.config_files.values()
            if c.get("current-context")
        ),
        None,
    )
    return merger, current


def current_context(path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> str:
    """The context kubectl uses when none is given: the first ``current-context`` of the
    files, merged as :func:`load_kubeconfig` merges them ('' when none sets one)."""
    return _merged(kubeconfig_paths(path))[1] or ""


def load_kubeconfig(
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    context: str | None = None,
    *,
    clock: Clock = SYSTEM_CLOCK,
) -> Credentials:
    """Resolve a kubeconfig's context into :class:`Credentials`, as kubectl would. Errors
    name the file, the entry and what is missing or wrong."""
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.config.kube_config import KubeConfigLoader

    paths = kubeconfig_paths(path)
    merger, current = _merged(paths)
    shown = os.pathsep.join(str(p) for p in paths)
    config = merger.config
    names = sorted(_name(c) for c in config.value.get("contexts") or [])
    ctx_name = context or current
    if not ctx_name:
        raise ConfigError(
            f"no current-context and no --context given; valid: {', '.join(names) or '(none)'}",
            source=shown,
            field="current-context",
        )
    if ctx_name not in names:
        # kubectl's own words (client-go's clientcmd), then what it does not say: the choice
        raise ConfigError(
            f"context was not found for specified context: {ctx_name}; valid: "
            f"{', '.join(names) or '(none)'}",
            source=shown,
            field="contexts",
        )
    try:
        loader = KubeConfigLoader(  # type: ignore[no-untyped-call]
            config_dict=config,
            active_context=ctx_name,
            config_base_path=None,
            config_persister=merger.save_changes,
        )
    except ConfigException as exc:
        raise ConfigError(f"context {ctx_name!r}: {exc}", source=shown, field="contexts") from None
    ctx = loader.current_context.get("context") or {}
    user_name = ctx.get("user")
    if not user_name:
        raise ConfigError(
            f"context {ctx_name!r} names no user: its requests would be anonymous",
            source=shown,
            field=f"contexts[{ctx_name}].user",
        )
    if loader._user is None:  # the loader would go on without credentials
        valid = sorted(_name(u) for u in config.value.get("users") or [])
        raise ConfigError(
            f"user {user_name!r} of context {ctx_name!r} not found; valid: "
            f"{', '.join(valid) or '(none)'}",
            source=shown,
            field="users",
        )
    return _credentials(loader, str(user_name), clock)


def _name(entry: Any) -> str:
    """An entry's name, whether the merger wrapped it (a ConfigNode) or not."""
    value = getattr(entry, "value", entry)
    return str(value.get("name")) if isinstance(value, dict) else ""


def _entry_path(node: Any) -> tuple[Path, str]:
    """The directory an entry's relative paths resolve against, and its file."""
    src = Path(node.path) if getattr(node, "path", None) else Path.cwd() / "kubeconfig"
    return src.parent.resolve(), str(src)


def _credentials(loader: Any, user_name: str, clock: Clock) -> Credentials:
    cluster_node, user_node = loader._cluster, loader._user
    cluster: Mapping[str, Any] = cluster_node.value
    user: Mapping[str, Any] = user_node.value
    cbase, csrc = _entry_path(cluster_node)
    ubase, usrc = _entry_path(user_node)
    cluster_name = str(loader.current_context["context"]["cluster"])
    server = cluster.get("server")
    if not server:
        raise ConfigError(
            "missing: the API server's URL", source=csrc, field=f"clusters[{cluster_name}].server"
        )
    ca_file, ca_data = _file_or_data(
        cluster, "certificate-authority", cbase, csrc, f"clusters[{cluster_name}]"
    )
    cert_file, cert_data = _file_or_data(
        user, "client-certificate", ubase, usrc, f"users[{user_name}]"
    )
    key_file, key_data = _file_or_data(user, "client-key", ubase, usrc, f"users[{user_name}]")
    if bool(cert_file or cert_data) != bool(key_file or key_data):
        missing = "client-key" if cert_file or cert_data else "client-certificate"
        raise ConfigError(
            "a client certificate needs both client-certificate and client-key; "
            f"missing: {missing}",
            source=usrc,
            field=f"users[{user_name}].{missing}",
        )
    proxy = cluster.get("proxy-url")
    if proxy and not str(proxy).startswith(("http://", "https://")):
        raise ConfigError(
            f"proxy scheme of {proxy!r} is not supported; valid: http://, https://",
            source=csrc,
            field=f"clusters[{cluster_name}].proxy-url",
        )
    token, auth, how = _user_auth(loader, user, user_name, ubase, usrc, cluster, ca_data, clock)
    if not (token or auth or cert_file or cert_data):
        raise ConfigError(
            "no credentials: none of token, tokenFile, client-certificate/client-key, exec, "
            "auth-provider, username/password; a request would be anonymous",
            source=usrc,
            field=f"users[{user_name}]",
        )
    if cert_file or cert_data:
        how = f"{how} and a client certificate" if how else "a client certificate"
    return Credentials(
        server=str(server).rstrip("/"),
        ca_file=ca_file,
        cert_file=cert_file,
        key_file=key_file,
        token=token,
        insecure=bool(cluster.get("insecure-skip-tls-verify", False)),
        ca_data=ca_data,
        cert_data=cert_data,
        key_data=key_data,
        auth=auth,
        tls_server_name=cluster.get("tls-server-name") or None,
        proxy_url=str(proxy) if proxy else None,
        describe=f"user {user_name!r} ({how})",
    )


def _file_or_data(
    section: Mapping[str, Any], key: str, base: Path, source: str, where: str
) -> tuple[str | None, bytes | None]:
    """``key-data`` or ``key`` (a path relative to its file); both is an error, as kubectl's
    validation makes it."""
    if section.get(f"{key}-data") and section.get(key):
        raise ConfigError(
            f"{key} and {key}-data are both given (kubectl refuses this too); keep one",
            source=source,
            field=f"{where}.{key}",
        )
    if section.get(f"{key}-data"):
        return None, _decode(str(section[f"{key}-data"]), source, f"{where}.{key}-data")
    if section.get(key):
        return str((base / str(section[key])).resolve()), None
    return None, None


def _user_auth(
    loader: Any,
    user: Mapping[str, Any],
    user_name: str,
    base: Path,
    source: str,
    cluster: Mapping[str, Any],
    ca_data: bytes | None,
    clock: Clock,
) -> tuple[str | None, AuthSource | None, str]:
    """(static token, changing source, how it signs in) for one kubeconfig user."""
    where = f"users[{user_name}]"
    desc = f"user {user_name!r}"
    methods = [m for m in ("exec", "auth-provider") if user.get(m)]
    if len(methods) > 1:
        raise ConfigError("exec and auth-provider cannot both be given", source=source, field=where)
    has_token = bool(user.get("token") or user.get("tokenFile"))
    if has_token and (user.get("username") or user.get("password")):
        raise ConfigError(
            "more than one authentication method (token and username/password); "
            "only one is allowed",
            source=source,
            field=where,
        )
    if user.get("tokenFile"):
        # joined and cleaned as client-go does, links not resolved: a projected token's file
        # links through ..data into a directory the kubelet replaces at each rotation
        path = Path(os.path.normpath(base / str(user["tokenFile"])))
        return None, TokenFile(path, f"{desc} (tokenFile {path})", clock=clock), "a token file"
    if user.get("token"):
        return str(user["token"]), None, "a token"
    if user.get("username") or user.get("password"):
        if not (user.get("username") and user.get("password")):
            raise ConfigError(
                "basic auth needs both username and password", source=source, field=where
            )
        pair = f"{user['username']}:{user['password']}".encode()
        return "Basic " + base64.b64encode(pair).decode(), None, "a username and password"
    if user.get("exec"):
        spec = exec_spec(user_name, user["exec"], base, source)
        info = _cluster_info(cluster, ca_data) if spec.provide_cluster_info else None
        return None, ExecPlugin(spec, info, clock=clock), f"exec plugin {Path(spec.command).name}"
    if user.get("auth-provider"):
        return None, _auth_provider(loader, user, user_name, source), "auth-provider oidc"
    return None, None, ""


def _cluster_info(cluster: Mapping[str, Any], ca_data: bytes | None) -> dict[str, Any]:
    """The ExecCredential's ``spec.cluster`` (``provideClusterInfo``): client-go's Cluster,
    its CA as base64 of the PEM (a ``[]byte`` in JSON), ``config`` from the cluster's
    ``client.authentication.k8s.io/exec`` extension."""
    info: dict[str, Any] = {"server": cluster.get("server")}
    for key in ("tls-server-name", "insecure-skip-tls-verify", "proxy-url", "disable-compression"):
        if cluster.get(key):
            info[key] = cluster[key]
    if ca_data is not None:
        info["certificate-authority-data"] = base64.b64encode(ca_data).decode()
    for ext in cluster.get("extensions") or []:
        if isinstance(ext, dict) and ext.get("name") == "client.authentication.k8s.io/exec":
            info["config"] = ext.get("extension")
    return info


def _auth_provider(loader: Any, user: Mapping[str, Any], user_name: str, source: str) -> AuthSource:
    provider = user["auth-provider"]
    name = provider.get("name") if isinstance(provider, dict) else None
    where = f"users[{user_name}].auth-provider"
    if name in _REMOVED_PROVIDERS:
        raise ConfigError(
            f"{name!r}: {_REMOVED_PROVIDERS[name]}", source=source, field=f"{where}.name"
        )
    if name != "oidc":
        raise ConfigError(
            f"{name!r} is not supported; valid: oidc (or an exec plugin)",
            source=source,
            field=f"{where}.name",
        )
    config = provider.get("config") or {}
    for key in ("id-token", "idp-issuer-url", "client-id"):
        if not config.get(key):
            raise ConfigError("missing", source=source, field=f"{where}.config.{key}")
    node = loader._user["auth-provider"]
    refresh = loader._refresh_oidc

    def refresh_verified(prov: Any) -> None:
        # Without an IdP CA the loader's refresh turns TLS verification off; kubectl uses
        # the system's roots: hand it those for this call (and keep them out of the file).
        given = "idp-certificate-authority" in prov["config"] or (
            "idp-certificate-authority-data" in prov["config"]
        )
        if not given:
            prov["config"].value["idp-certificate-authority"] = _system_ca_file()
        try:
            refresh(prov)
        finally:
            if not given:
                prov["config"].value.pop("idp-certificate-authority", None)

    loader._refresh_oidc = refresh_verified

    def load() -> str | None:
        token = loader._load_oid_token(node)
        return str(token) if token else None

    return LoaderToken(load, f"user {user_name!r} (auth-provider oidc)")


def _system_ca_file() -> str:
    paths = ssl.get_default_verify_paths()
    if paths.cafile and Path(paths.cafile).is_file():
        return paths.cafile
    import certifi  # a dependency of requests, which the kubernetes package needs

    return str(certifi.where())


#: where a pod finds its ServiceAccount's token and the cluster's CA
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def in_cluster_credentials(
    *,
    sa_dir: Path = SERVICE_ACCOUNT_DIR,
    environ: Mapping[str, str] | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> Credentials:
    """The pod's own ServiceAccount, as client-go's in-cluster config: the server from
    ``KUBERNETES_SERVICE_HOST``/``_PORT``, the mounted CA, and the projected token re-read
    every minute (the kubelet rotates it in place). The ``kubernetes`` package's
    :class:`InClusterConfigLoader` checks the environment and files; its own token refresh
    reads the wall clock, so the re-reading is :class:`TokenFile`'s (on powercut's clock)."""
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.config.incluster_config import InClusterConfigLoader

    token_path, ca_path = sa_dir / "token", sa_dir / "ca.crt"
    found = InClusterConfigLoader(  # type: ignore[no-untyped-call]
        token_filename=str(token_path),
        cert_filename=str(ca_path),
        try_refresh_token=False,
        environ=dict(os.environ if environ is None else environ),
    )
    try:
        found._load_config()  # type: ignore[no-untyped-call]
    except ConfigException as exc:
        raise ConfigError(f"not usable from inside a pod: {exc}", source=str(sa_dir)) from None
    desc = "the pod's ServiceAccount (in-cluster)"
    return Credentials(
        server=str(found.host),
        ca_file=str(ca_path),
        auth=TokenFile(token_path, desc, clock=clock),
        describe=desc,
    )
