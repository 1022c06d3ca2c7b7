"""Credentials that change while a run goes on: exec plugins, token files, OIDC tokens.

A kubeconfig user resolves (:mod:`harness.kube.kubeconfig`) either to static material (a
token, a client certificate) or to one of the :class:`AuthSource` here, which the client asks
for the current :class:`Auth` before each request and tells about a 401
(:meth:`AuthSource.invalidate`): the source fetches anew, and the client retries once.

- :class:`ExecPlugin`: a ``client.authentication.k8s.io/v1`` or ``v1beta1`` exec credential
  plugin (EKS, GKE, AKS kubelogin, OIDC kubelogin, Teleport, Pinniped), run as kubectl runs
  it: ``KUBERNETES_EXEC_INFO`` in its environment (the cluster's details with
  ``provideClusterInfo``), never interactive, its token or client certificate cached until
  its ``expirationTimestamp`` and fetched again shortly before it lapses.
- :class:`TokenFile`: a ``tokenFile`` or an in-cluster ServiceAccount token, re-read every
  minute as client-go does (the kubelet rotates the projected token in place).
- :class:`LoaderToken`: a token the ``kubernetes`` package's loader refreshes (auth-provider
  ``oidc``).

Why the ``kubernetes`` package's own ``ExecProvider`` is not used: it hands the plugin the
terminal when there is one (a run is unattended: kubectl's ``interactiveMode: Never``), it
ignores ``interactiveMode`` and ``installHint``, it passes the kubeconfig's cluster entry as
is rather than the ExecCredential's Cluster (``certificate-authority-data``, ``config``), it
writes a client key from the plugin to a temporary file kept until the process exits, and
the loader logs its errors and goes on without credentials (a silent anonymous request).
"""

from __future__ import annotations

import datetime
import logging
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson

from harness.clock import SYSTEM_CLOCK, Clock
from harness.errors import ConfigError, PermanentError

log = logging.getLogger(__name__)

#: the exec credential API versions kubectl still speaks (v1alpha1 was removed in 1.24)
EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")
#: how often a token file is read again (client-go's cached file token source: one minute)
TOKEN_FILE_PERIOD_S = 60.0
#: a credential is fetched again this long before it lapses, or a tenth of its lifetime when
#: that is shorter (a 2-minute credential is renewed 12 s early, a 1-hour one 60 s early)
EXPIRY_MARGIN_S = 60.0
#: how long an exec plugin may run
EXEC_TIMEOUT_S = 120.0


class CredentialError(PermanentError):
    """A credential could not be obtained: which user, which plugin or file, and why."""


@dataclass(frozen=True)
class Auth:
    """What one request carries: an ``Authorization`` header and/or a client certificate
    (PEM, in memory). ``generation`` changes when the certificate does."""

    header: str | None = field(default=None, repr=False)
    cert_pem: bytes | None = field(default=None, repr=False)
    key_pem: bytes | None = field(default=None, repr=False)
    generation: int = 0


class AuthSource(Protocol):
    #: for messages: which kubeconfig user, through what (never a secret)
    describe: str

    def current(self) -> Auth:
        """The credential to use now, fetched again if it has lapsed or is about to."""
        ...

    def invalidate(self) -> None:
        """The API server refused the credential (401): fetch anew on the next call."""
        ...


def parse_rfc3339(text: str, where: str) -> float:
    """An RFC 3339 timestamp (``2026-11-28T01:02:03Z``, fractions and offsets too) as a
    POSIX time."""
    try:
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise CredentialError(f"{where}: not an RFC 3339 timestamp: {text!r}") from None
    if when.tzinfo is None:
        raise CredentialError(f"{where}: timestamp without a time zone: {text!r}")
    return when.timestamp()


class TokenFile:
    """A bearer token read from a file, read again every ``period_s`` and after a 401."""

    def __init__(
        self,
        path: Path,
        describe: str,
        *,
        clock: Clock = SYSTEM_CLOCK,
        period_s: float = TOKEN_FILE_PERIOD_S,
    ) -> None:
        self.path = path
        self.describe = describe
        self.clock = clock
        self.period_s = period_s
        self.reads = 0
        self._lock = threading.Lock()
        self._auth: Auth | None = None
        self._read_at = 0.0

    def current(self) -> Auth:
        with self._lock:
            now = self.clock.monotonic()
            if self._auth is None or now - self._read_at >= self.period_s:
                self._auth = Auth(header=f"Bearer {self._read()}")
                self._read_at = now
            return self._auth

    def invalidate(self) -> None:
        with self._lock:
            self._auth = None

    def _read(self) -> str:
        try:
            token = self.path.read_text().strip()
        except OSError as exc:
            raise CredentialError(
                f"{self.describe}: cannot read the token file {self.path}: {exc.strerror}"
            ) from None
        if not token:
            raise CredentialError(f"{self.describe}: the token file {self.path} is empty")
        self.reads += 1
        return token


class LoaderToken:
    """A token the ``kubernetes`` package's loader keeps (auth-provider ``oidc``):
    ``load()`` returns the ``Authorization`` value, refreshing the token when it has
    expired; ``invalidate`` asks again at the next call."""

    def __init__(self, load: Callable[[], str | None], describe: str) -> None:
        self._load = load
        self.describe = describe
        self._lock = threading.Lock()

    def current(self) -> Auth:
        with self._lock:
            try:
                header = self._load()
            except PermanentError:
                raise
            except Exception as exc:  # noqa: BLE001 (the loader's errors vary; reworded)
                raise CredentialError(
                    f"{self.describe}: refreshing the token failed: {type(exc).__name__}: {exc}"
                ) from None
            if not header:
                raise CredentialError(f"{self.describe}: the token could not be read")
            return Auth(header=header)

    def invalidate(self) -> None:
        """The loader decides from the token's own expiry; nothing is cached here."""


@dataclass(frozen=True)
class ExecSpec:
    """A kubeconfig user's ``exec`` section, checked."""

    user: str
    api_version: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    install_hint: str = ""
    interactive_mode: str = "IfAvailable"
    provide_cluster_info: bool = False


def exec_spec(user: str, section: Mapping[str, Any], base: Path, source: str) -> ExecSpec:
    """Check an ``exec`` section as kubectl does; errors name the user and the field."""
    where = f"users[{user}].exec"

    def bad(message: str, key: str) -> ConfigError:
        return ConfigError(message, source=source, field=f"{where}.{key}")

    api = section.get("apiVersion")
    if api not in EXEC_API_VERSIONS:
        return_valid = ", ".join(EXEC_API_VERSIONS)
        raise bad(f"apiVersion {api!r} is not supported; valid: {return_valid}", "apiVersion")
    command = section.get("command")
    if not isinstance(command, str) or not command:
        raise bad("missing: the plugin's command", "command")
    if os.sep in command and not os.path.isabs(command):
        command = str((base / command).resolve())  # relative to its kubeconfig, as kubectl
    mode = section.get("interactiveMode")
    if mode is None and api.endswith("/v1"):
        raise bad(
            f"missing (required by {api}); valid: Never, IfAvailable, Always", "interactiveMode"
        )
    mode = mode or "IfAvailable"
    if mode not in INTERACTIVE_MODES:
        raise bad(
            f"{mode!r} is not valid; valid: {', '.join(INTERACTIVE_MODES)}", "interactiveMode"
        )
    env: list[tuple[str, str]] = []
    for i, item in enumerate(section.get("env") or []):
        if not isinstance(item, dict) or "name" not in item or "value" not in item:
            raise bad("each entry needs a name and a value", f"env[{i}]")
        env.append((str(item["name"]), str(item["value"])))
    args = section.get("args") or []
    if not isinstance(args, list):
        raise bad("must be a list of strings", "args")
    return ExecSpec(
        user=user,
        api_version=str(api),
        command=command,
        args=tuple(str(a) for a in args),
        env=tuple(env),
        install_hint=str(section.get("installHint") or ""),
        interactive_mode=str(mode),
        provide_cluster_info=bool(section.get("provideClusterInfo", False)),
    )


#: runs a plugin: (argv, environment, timeout) -> (exit code, stdout, stderr)
Runner = Callable[[Sequence[str], Mapping[str, str], float], tuple[int, str, str]]


def run_plugin(
    argv: Sequence[str], env: Mapping[str, str], timeout_s: float
) -> tuple[int, str, str]:
    """Run a plugin without a terminal (stdin closed), as kubectl's ``Never`` mode does."""
    proc = subprocess.run(  # the user's own kubeconfig names the command
        list(argv),
        env=dict(env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    return proc.returncode, proc.stdout, proc.stderr


class ExecPlugin:
    """An exec credential plugin, called when no credential is cached or the cached one is
    about to lapse or was refused. ``calls`` counts how often it ran."""

    def __init__(
        self,
        spec: ExecSpec,
        cluster_info: Mapping[str, Any] | None,
        *,
        clock: Clock = SYSTEM_CLOCK,
        runner: Runner = run_plugin,
        timeout_s: float = EXEC_TIMEOUT_S,
    ) -> None:
        self.spec = spec
        self.cluster_info = dict(cluster_info) if cluster_info else None
        self.describe = f"user {spec.user!r} (exec plugin {Path(spec.command).name})"
        self.clock = clock
        self.runner = runner
        self.timeout_s = timeout_s
        self.calls = 0
        self.expires_at: float | None = None  # POSIX time; None: until refused
        self._refresh_at: float | None = None
        self._auth: Auth | None = None
        self._generation = 0
        self._lock = threading.Lock()

    def current(self) -> Auth:
        with self._lock:
            now = self.clock.time()
            if self._auth is not None and (self._refresh_at is None or now < self._refresh_at):
                return self._auth
            try:
                self._auth = self._fetch()
            except CredentialError as exc:
                # renewing early failed: the credential in hand still holds until it lapses
                if self._auth is None or self.expires_at is None or now >= self.expires_at:
                    raise
                log.warning("%s (the current credential holds for %.0f s)", exc,
                            self.expires_at - now)  # fmt: skip
            return self._auth

    def invalidate(self) -> None:
        with self._lock:
            self._auth = None

    def exec_info(self) -> dict[str, Any]:
        """The ExecCredential the plugin reads from ``KUBERNETES_EXEC_INFO``."""
        spec: dict[str, Any] = {"interactive": False}
        if self.cluster_info is not None:
            spec["cluster"] = self.cluster_info
        return {"apiVersion": self.spec.api_version, "kind": "ExecCredential", "spec": spec}

    def _fetch(self) -> Auth:
        if self.spec.interactive_mode == "Always":
            raise CredentialError(
                f"{self.describe}: interactiveMode is Always, which needs a terminal; "
                "powercut runs unattended (use Never or IfAvailable)"
            )
        argv = [self.spec.command, *self.spec.args]
        env = {**os.environ, **dict(self.spec.env)}
        env["KUBERNETES_EXEC_INFO"] = orjson.dumps(self.exec_info()).decode()
        if shutil.which(self.spec.command, path=env.get("PATH")) is None:
            hint = f"; {self.spec.install_hint.strip()}" if self.spec.install_hint else ""
            raise CredentialError(
                f"{self.describe}: the plugin {self.spec.command!r} was not found "
                f"(not on PATH, or not executable){hint}"
            )
        started = self.clock.time()
        try:
            code, out, err = self.runner(argv, env, self.timeout_s)
        except subprocess.TimeoutExpired:
            raise CredentialError(
                f"{self.describe}: the plugin did not answer within {self.timeout_s:.0f} s"
            ) from None
        except OSError as exc:
            raise CredentialError(f"{self.describe}: cannot run the plugin: {exc}") from None
        self.calls += 1
        if code != 0:
            tail = err.strip()[-500:]
            raise CredentialError(
                f"{self.describe}: the plugin exited with status {code}"
                + (f": {tail}" if tail else "")
            )
        return self._parse(out, started)

    def _parse(self, out: str, started: float) -> Auth:
        try:
            doc = orjson.loads(out)
        except orjson.JSONDecodeError:
            raise CredentialError(f"{self.describe}: the plugin's output is not JSON") from None
        if not isinstance(doc, dict) or doc.get("kind") != "ExecCredential":
            raise CredentialError(f"{self.describe}: the plugin's output is not an ExecCredential")
        if doc.get("apiVersion") != self.spec.api_version:
            raise CredentialError(
                f"{self.describe}: the plugin answered apiVersion {doc.get('apiVersion')!r}, "
                f"the kubeconfig asks for {self.spec.api_version!r}"
            )
        status = doc.get("status") or {}
        token = status.get("token")
        cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
        if not token and not (cert and key):
            raise CredentialError(
                f"{self.describe}: the plugin's status holds neither a token nor "
                "clientCertificateData with clientKeyData"
            )
        expiry = status.get("expirationTimestamp")
        self.expires_at = (
            parse_rfc3339(str(expiry), f"{self.describe}: expirationTimestamp") if expiry else None
        )
        self._refresh_at = None
        if self.expires_at is not None:
            margin = min(EXPIRY_MARGIN_S, max(0.0, self.expires_at - started) / 10)
            self._refresh_at = self.expires_at - margin
            log.info("%s: credential valid for %.0f s", self.describe, self.expires_at - started)
        if cert and key:
            self._generation += 1
        return Auth(
            header=f"Bearer {token}" if token else None,
            cert_pem=cert.encode() if cert and key else None,
            key_pem=key.encode() if cert and key else None,
            generation=self._generation,
        )
