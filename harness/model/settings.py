"""The settings Kubernetes' own timings depend on, and where each was read.

A :class:`Setting` is one value (seconds, a rate, a fraction) with the place it was read
(a controller-manager flag of a static pod in kube-system, kubeadm's ClusterConfiguration, a
node's Lease, a pod's tolerations, a kubelet's configz) or ``assumed``: the default of the
server's version, where the cluster does not show it (managed control planes, a lab run as
processes that publishes nothing). See docs/budgets.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "DEFAULTS",
    "FIXED",
    "Setting",
    "default_for",
    "go_duration",
]


@dataclass(frozen=True, slots=True)
class Setting:
    """One value the model rests on: ``name`` as the component spells it, ``value`` in
    ``unit``, ``source`` where it was read, ``assumed`` when it is a default, not read."""

    name: str
    value: float
    unit: str
    source: str
    assumed: bool = False

    def shown(self) -> str:
        """``node-monitor-grace-period 12 s (flag of kube-system/kcm-cp-1)``."""
        how = f"assumed: {self.source}" if self.assumed else self.source
        return f"{self.name} {self.value:g} {self.unit} ({how})"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": self.value,
            "unit": self.unit,
            "source": self.source,
            "assumed": self.assumed,
        }

    @staticmethod
    def from_json(doc: dict[str, Any]) -> Setting:
        return Setting(
            str(doc["name"]),
            float(doc["value"]),
            str(doc["unit"]),
            str(doc["source"]),
            bool(doc.get("assumed", False)),
        )


#: kube-controller-manager and kube-apiserver flags the model reads, with their defaults
#: (Kubernetes 1.32 and later; :func:`default_for` gives the older grace period) and units.
DEFAULTS: Final[dict[str, tuple[float, str]]] = {
    "node-monitor-grace-period": (50.0, "s"),
    "node-monitor-period": (5.0, "s"),
    "node-eviction-rate": (0.1, "node/s"),
    "secondary-node-eviction-rate": (0.01, "node/s"),
    "unhealthy-zone-threshold": (0.55, "fraction"),
    "large-cluster-size-threshold": (50.0, "nodes"),
    "leader-elect-lease-duration": (15.0, "s"),
    "leader-elect-retry-period": (2.0, "s"),
    "default-not-ready-toleration-seconds": (300.0, "s"),
    "default-unreachable-toleration-seconds": (300.0, "s"),
    # the kubelet's (KubeletConfiguration), read through configz where allowed
    "nodeLeaseDurationSeconds": (40.0, "s"),
    "shutdownGracePeriod": (0.0, "s"),
    "shutdownGracePeriodCriticalPods": (0.0, "s"),
}

#: Constants of kube-controller-manager that no flag changes.
FIXED: Final[dict[str, tuple[float, str, str]]] = {
    "maxWaitForUnmountDuration": (
        360.0,
        "s",
        "the attach-detach controller's forced-detach wait, fixed in kube-controller-manager",
    ),
    "podgc-quarantine": (40.0, "s", "PodGC's quarantine of an orphaned pod, fixed"),
    "podgc-period": (20.0, "s", "PodGC's period, fixed"),
}


def default_for(name: str, version: tuple[int, int] | None) -> Setting:
    """The default of flag ``name`` for a server of ``version`` (major, minor), assumed."""
    value, unit = DEFAULTS[name]
    shown = f"{version[0]}.{version[1]}" if version else "unknown version"
    if name == "node-monitor-grace-period" and version is not None and version < (1, 32):
        value = 40.0
    return Setting(name, value, unit, f"Kubernetes {shown} default", assumed=True)


_GO_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_GO_UNIT: Final[dict[str, float]] = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def go_duration(text: str) -> float | None:
    """Seconds of a Go duration (``40s``, ``1m0s``, ``500ms``) or a bare number of
    seconds; None when ``text`` is neither."""
    text = text.strip().strip('"')
    try:
        return float(text)
    except ValueError:
        pass
    parts = _GO_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _GO_UNIT[u] for n, u in parts)
