"""Pre-flight checks: is the cluster fit to be disrupted, and can powercut undo it?

Run before a disruption, on the nodes it targets. Each check is named after what it looks
at (the node's name is given for per-node checks):

``api``
    The API server answers ``GET /version`` within ``api_timeout_s``.
``permissions`` / ``permission``
    When given the permissions the chosen features need (:mod:`harness.rbac`), the
    credentials hold each, by the API server's own SelfSubjectAccessReview; each missing
    verb is a failing ``permission`` check that names it, before anything is touched.
``node``
    Each target is a Node of the cluster (the inventory names the right cluster).
``ready``
    Each target Node is Ready: disrupting a node that is already down measures nothing
    and may break the blast-radius assumptions.
``bmc``
    Each target's power endpoint answers a power-state read within ``bmc_timeout_s``
    (default: the inventory's ``power_ack`` budget), so the node can be powered back on,
    and reads the power as on (a Node still shows Ready for a while after a power cut).

:func:`deep_preflight` (``powercut preflight --deep``) probes each node's BMCs read-only
(see :mod:`harness.power.probe`) and asks each chosen failure kind's judge (each strategy of
``harness.failures`` has one, built on :func:`judge_resets` / :func:`judge_driver`) what it
will use there.

:func:`preflight` runs every check (the BMCs in parallel) and returns a
:class:`PreflightResult`; when any check failed it raises :class:`PreflightFailed`, a
``PermanentError`` naming every failing check and carrying the whole result.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Final

from harness.errors import PermanentError, PowercutError
from harness.inventory import Inventory
from harness.kube.client import JSON, ApiError, KubeClient, NotFound
from harness.power.base import PowerState, ResetType
from harness.power.factory import available_protocols, driver_for
from harness.power.probe import ProbeReport, probe
from harness.rbac import Permission, missing

__all__ = [
    "API_TIMEOUT_S",
    "BMC_GRACE_S",
    "Check",
    "DeepResult",
    "DeepRow",
    "Judge",
    "PreflightFailed",
    "PreflightResult",
    "deep_preflight",
    "judge_driver",
    "judge_resets",
    "preflight",
]

#: Longest wait for the API server's answers during the pre-flight.
API_TIMEOUT_S: Final = 10.0
#: How long past its own deadline a driver may take to give up (one request in flight:
#: the Redfish driver's longest request is 10 s) before the pre-flight stops waiting.
BMC_GRACE_S: Final = 15.0


@dataclasses.dataclass(frozen=True, slots=True)
class Check:
    """One check: what was checked (``name``, ``node``), whether it passed, and what was seen."""

    name: str
    ok: bool
    detail: str
    node: str = ""

    @property
    def label(self) -> str:
        return f"{self.name} {self.node}" if self.node else self.name

    def __str__(self) -> str:
        return f"{'ok' if self.ok else 'FAIL':4}  {self.label}: {self.detail}"


@dataclasses.dataclass(frozen=True, slots=True)
class PreflightResult:
    """Every check, in the order: ``api``, then per node ``node``, ``ready``, ``bmc``."""

    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def failed(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if not c.ok)

    def lines(self) -> list[str]:
        """One line per check: ``ok    bmc w1: ipmi answers, power on``."""
        return [str(c) for c in self.checks]


class PreflightFailed(PermanentError):
    """Some pre-flight checks failed; ``result`` has every check, ``failed`` the failures."""

    def __init__(self, result: PreflightResult) -> None:
        self.result = result
        self.failed = result.failed
        super().__init__(
            f"pre-flight: {len(self.failed)} of {len(result.checks)} checks failed: "
            + "; ".join(f"{c.label}: {c.detail}" for c in self.failed)
        )


def preflight(
    inventory: Inventory,
    nodes: Iterable[str],
    client: KubeClient,
    *,
    protocol: str | None = None,
    api_timeout_s: float = API_TIMEOUT_S,
    bmc_timeout_s: float | None = None,
    permissions: Sequence[Permission] = (),
) -> PreflightResult:
    """Check the API server, that the credentials hold each of ``permissions`` (a
    SelfSubjectAccessReview each; one failing check per missing verb, named), and that each
    of ``nodes`` is a Ready Node whose power endpoint (``protocol``, default its primary)
    answers.

    Returns the result when every check passed; raises :class:`PreflightFailed` naming
    every failing check otherwise, and ``ConfigError`` for a node the inventory lacks.
    """
    names = list(dict.fromkeys(nodes))
    for name in names:
        inventory.node(name)  # an unknown node is a mistake in the command, not a check
    bmc_s = inventory.timing_budgets().power_ack if bmc_timeout_s is None else bmc_timeout_s
    # The BMCs are asked in parallel while the API server is asked in this thread.
    pool = ThreadPoolExecutor(max_workers=max(1, min(16, len(names))))
    try:
        bmcs = {n: pool.submit(_bmc_check, inventory, n, protocol, bmc_s) for n in names}
        api, answered = _api_check(client, api_timeout_s)
        granted = _permission_checks(client, permissions) if answered and permissions else []
        per_node = {n: _node_checks(client, n, answered, api_timeout_s) for n in names}
        bmc_checks = _collect(bmcs, bmc_s + BMC_GRACE_S)
    finally:
        # Not waiting for a driver that overran: it gives up by its own deadline.
        pool.shutdown(wait=False, cancel_futures=True)
    checks = [api, *granted]
    for name in names:
        checks.extend([*per_node[name], bmc_checks[name]])
    result = PreflightResult(tuple(checks))
    if not result.ok:
        raise PreflightFailed(result)
    return result


def _permission_checks(client: KubeClient, permissions: Sequence[Permission]) -> list[Check]:
    """One passing check for all the permissions, or one failing check per missing one."""
    try:
        lacking = missing(client, permissions)
    except ApiError as exc:
        return [Check("permissions", False, f"cannot ask the API server: {exc}")]
    if not lacking:
        tiers = ", ".join(dict.fromkeys(p.tier for p in permissions))
        return [Check("permissions", True, f"{len(set(permissions))} granted (tiers {tiers})")]
    who = client.identity()
    return [
        Check("permission", False, f"{who} lacks {p} (docs/rbac.md, powercut rbac)")
        for p in lacking
    ]


def _api_check(client: KubeClient, timeout_s: float) -> tuple[Check, bool]:
    """The ``api`` check, and whether the server answered at all."""
    try:
        version = client.request("GET", "/version", timeout_s=timeout_s)
    except ApiError as exc:
        return Check("api", False, f"{client.server} answers with an error: {exc}"), True
    except PowercutError as exc:
        return Check("api", False, f"{client.server} does not answer: {exc}"), False
    return Check("api", True, f"{client.server} answers, {version.get('gitVersion', '?')}"), True


def _node_checks(client: KubeClient, name: str, answered: bool, timeout_s: float) -> list[Check]:
    if not answered:
        why = "not checked: the API server does not answer"
        return [Check("node", False, why, name), Check("ready", False, why, name)]
    try:
        obj = client.request("GET", f"/api/v1/nodes/{name}", timeout_s=timeout_s)
    except NotFound:
        return [
            Check("node", False, "the cluster has no Node of this name (kubectl get nodes)", name),
            Check("ready", False, "not checked: no such Node", name),
        ]
    except PowercutError as exc:
        return [
            Check("node", False, f"cannot read the Node: {exc}", name),
            Check("ready", False, "not checked: the Node could not be read", name),
        ]
    return [Check("node", True, "is a Node of the cluster", name), _ready_check(obj, name)]


def _ready_check(obj: JSON, name: str) -> Check:
    conditions = (obj.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    cordoned = " (cordoned)" if (obj.get("spec") or {}).get("unschedulable") else ""
    if ready is None:
        return Check("ready", False, "the Node has no Ready condition yet", name)
    status = str(ready.get("status"))
    if status == "True":
        return Check("ready", True, f"Ready{cordoned}", name)
    reason = ": ".join(str(ready[k]) for k in ("reason", "message") if ready.get(k))
    return Check(
        "ready", False, f"Ready is {status}{f' ({reason})' if reason else ''}{cordoned}", name
    )


def _bmc_check(inventory: Inventory, name: str, protocol: str | None, timeout_s: float) -> Check:
    spec = inventory.node(name)
    proto = protocol or spec.power.driver
    try:
        driver = driver_for(spec, protocol, budgets=inventory.timing_budgets(), timeout_s=timeout_s)
        try:
            state = driver.state()
        finally:
            driver.close()
    except PowercutError as exc:
        return Check("bmc", False, f"{proto}: {exc}", name)
    if proto == "ssh" and state is PowerState.OFF:
        # The SSH driver reads "off" when the node does not answer at all.
        return Check("bmc", False, "ssh: the node does not answer SSH", name)
    if state is not PowerState.ON:
        # A Node can still show Ready for a grace period after its power went off.
        return Check("bmc", False, f"{proto} answers, but the power is {state.value}", name)
    return Check("bmc", True, f"{proto} answers, power on", name)


def _collect(futures: dict[str, Future[Check]], timeout_s: float) -> dict[str, Check]:
    """Each BMC check's result; a check still running after ``timeout_s`` fails."""
    wait(futures.values(), timeout=timeout_s)
    out: dict[str, Check] = {}
    for name, future in futures.items():
        if future.done():
            out[name] = future.result()
        else:
            out[name] = Check("bmc", False, f"no answer within {timeout_s:.0f} s", name)
    return out


# --------------------------------------------------------------------------------------------
# Deep pre-flight: what each node's BMC negotiated and allows (read-only)
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class DeepRow:
    """One node's probe through one protocol (``report`` None: ``error`` says why)."""

    node: str
    protocol: str
    report: ProbeReport | None
    error: str = ""
    primary: bool = False
    #: The driver, closed after its probe: what a failure kind asks whether it can do.
    driver: object = None


@dataclasses.dataclass(frozen=True, slots=True)
class DeepResult:
    """Every probe, and per node and failure kind what it will use (or why it cannot)."""

    rows: tuple[DeepRow, ...]
    kinds: tuple[str, ...]
    uses: dict[str, dict[str, tuple[bool, str]]]

    @property
    def unfit(self) -> list[str]:
        """The nodes that cannot serve every chosen kind, in inventory order."""
        return [n for n, per in self.uses.items() if not all(ok for ok, _ in per.values())]

    def table(self) -> list[str]:
        """One table: a line per node and protocol, then the kinds' columns."""
        head = ["NODE", "PROTOCOL", "AUTHENTICATION", "SECURITY", "PRIVILEGE", "RESETS",
                "TLS", "CONNECT", "READ", *(k.upper() for k in self.kinds)]  # fmt: skip
        lines = [head]
        for row in self.rows:
            cells = _row_cells(row)
            kinds = self.uses.get(row.node, {})
            for kind in self.kinds:
                ok, text = kinds.get(kind, (False, ""))
                cells.append((text if ok else f"NO: {text}") if row.primary else "")
            lines.append(cells)
        widths = [max(len(r[i]) for r in lines) for i in range(len(head))]
        return [
            "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in lines
        ]


def _row_cells(row: DeepRow) -> list[str]:
    name = f"{row.protocol}{' (primary)' if row.primary else ''}"
    r = row.report
    if r is None:
        return [row.node, name, f"FAILED: {row.error}", "", "", "", "", "", ""]
    resets = "unknown" if r.reset_types is None else (
        ",".join(sorted(t.value for t in r.reset_types)) or "none"
    )  # fmt: skip
    tls = "-"
    if r.tls_chain:
        leaf = r.tls_chain[0]
        tls = f"{'verified' if r.tls_verified else 'NOT verified'}, expires {leaf.not_after} "
        tls += f"({leaf.days_left:.0f} d), {len(r.tls_chain)} cert(s)"
    elif r.tls_verified is not None:
        tls = "verified" if r.tls_verified else "NOT verified"
    return [row.node, name, r.authentication or "?", r.security or "?", r.privilege or "-",
            resets, tls, _secs(r.connect_s), _secs(r.readback_s)]  # fmt: skip


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f} ms"


#: How a failure kind judges a node from its probes: (True, what it will use) or
#: (False, why it cannot). Each kind's strategy has one (``harness.failures``).
Judge = Callable[[Sequence[DeepRow]], tuple[bool, str]]


def deep_preflight(
    inventory: Inventory,
    nodes: Iterable[str],
    kinds: Mapping[str, Judge],
    *,
    protocol: str | None = None,
    timeout_s: float | None = None,
) -> DeepResult:
    """Probe every protocol of each of ``nodes`` (read-only: a session, one state read)
    and ask each of ``kinds`` (name -> judge) what it will use on the node.

    The row of ``protocol`` (default: the node's primary power driver) is the primary one:
    the power kinds use it.
    """
    names = list(dict.fromkeys(nodes))
    budget = inventory.timing_budgets().power_ack if timeout_s is None else timeout_s
    jobs: list[tuple[str, str, bool]] = []
    for name in names:
        spec = inventory.node(name)
        primary = protocol or spec.power.driver
        jobs.extend((name, p, p == primary) for p in available_protocols(spec))
    # One thread per probe (up to 64): a probe waits for its driver's deadline, not behind
    # others (a lab's one Redfish emulator answers every node's probe in turn).
    workers = max(1, min(64, len(jobs)))
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        futures = [pool.submit(_probe_one, inventory, n, p, budget) for n, p, _ in jobs]
        wait(futures, timeout=(budget + BMC_GRACE_S) * math.ceil(len(jobs) / workers))
        rows: list[DeepRow] = []
        for (n, p, is_primary), fut in zip(jobs, futures, strict=True):
            if fut.done():
                report, error, driver = fut.result()
            else:
                report, error, driver = None, f"no answer within {budget:.0f} s", None
            rows.append(DeepRow(n, p, report, error, is_primary, driver))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    uses = {
        n: {kind: judge([r for r in rows if r.node == n]) for kind, judge in kinds.items()}
        for n in names
    }
    return DeepResult(tuple(rows), tuple(kinds), uses)


def _probe_one(
    inventory: Inventory, name: str, proto: str, timeout_s: float
) -> tuple[ProbeReport | None, str, object]:
    spec = inventory.node(name)
    try:
        driver = driver_for(spec, proto, budgets=inventory.timing_budgets(), timeout_s=timeout_s)
    except PowercutError as exc:
        return None, str(exc), None
    try:
        return probe(driver, proto), "", driver
    except PowercutError as exc:
        return None, str(exc), driver
    finally:
        driver.close()


def judge_resets(
    rows: Sequence[DeepRow], options: Sequence[Sequence[ResetType]]
) -> tuple[bool, str]:
    """A power kind's judgement: the first of ``options`` (each a set of reset types the
    primary power driver must all allow) that the node's BMC allows."""
    main = next((r for r in rows if r.primary), None)
    if main is None or main.report is None:
        return False, f"{main.protocol if main else 'power'} probe failed"
    allowed = main.report.reset_types
    if allowed is None:
        return True, f"{main.protocol} (reset types unknown: not checked)"
    for option in options:
        if all(t in allowed for t in option):
            return True, f"{main.protocol} {', '.join(t.value for t in option)}"
    missing = [t.value for t in options[0] if t not in allowed]
    return False, f"{main.protocol} lacks {', '.join(missing)}"


def judge_driver(rows: Sequence[DeepRow], can: Callable[[object], bool]) -> tuple[bool, str]:
    """A kind done by a driver that can (a partition, a kubelet stop): the first of the
    node's drivers for which ``can`` holds."""
    for row in rows:
        if row.driver is not None and can(row.driver):
            if row.report is None:
                return False, f"{row.protocol} can, but its probe failed"
            return True, row.protocol
    return False, "no driver of this node can (ssh can)"
