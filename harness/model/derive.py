"""``powercut budgets derive``: a budget file from the model plus a margin, each figure
commented with the setting behind it (docs/budgets.md)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from harness.budgets import Budgets, budget_names, dashed
from harness.errors import ConfigError
from harness.model.cluster import ClusterModel

__all__ = ["Margin", "derive_text", "parse_margin"]


@dataclass(frozen=True)
class Margin:
    """What is added to each modelled upper bound: a fraction of it and seconds."""

    fraction: float = 0.25
    seconds: float = 0.0

    def apply(self, x: float) -> float:
        return x * (1 + self.fraction) + self.seconds

    def __str__(self) -> str:
        parts = []
        if self.fraction:
            parts.append(f"{self.fraction * 100:g}%")
        if self.seconds:
            parts.append(f"{self.seconds:g} s")
        return " + ".join(parts) or "none"


_MARGIN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(%|s)\s*$")


def parse_margin(text: str) -> Margin:
    """``"25%"``, ``"10s"`` or both (``"25%,10s"``)."""
    fraction = seconds = 0.0
    for part in text.split(","):
        m = _MARGIN.match(part)
        if m is None:
            raise ConfigError(
                f"margin {part.strip()!r} not understood; write a percentage ('25%'), "
                "seconds ('10s') or both ('25%,10s')",
                field="--margin",
            )
        value = float(m.group(1))
        if m.group(2) == "%":
            fraction += value / 100
        else:
            seconds += value
    return Margin(fraction, seconds)


def _figure(x: float) -> str:
    return f"{math.ceil(x):d}"


def derive_text(
    model: ClusterModel, base: Budgets, profile: str, margin: Margin, *, source: str
) -> str:
    """The budget file: the inventory's ``budgets:`` mapping (profile and overrides)."""
    lines = [
        f"# powercut budgets derived from the model of {source} (Kubernetes {model.version}),",
        f"# margin {margin} over each modelled upper bound. Budgets the model does not predict",
        f"# keep profile {profile!r}'s figure. Use it as the inventory's `budgets:` mapping.",
        f"profile: {profile}",
        "overrides:",
    ]
    for name in budget_names():
        b = model.bound(name)
        if b is None or b.high_s is None:
            lines.append(f"  # {dashed(name)}: not modelled, profile's {base.get(name):g} s kept")
            continue
        figure = max(margin.apply(b.high_s), b.low_s)
        lines.append(f"  # {b.why}")
        lines.append(f"  # dominated by {b.setting}: {b.source}")
        lines.append(
            f"  {dashed(name)}: {_figure(figure)}  # model {b.low_s:g}-{b.high_s:g} s + margin"
        )
    return "\n".join(lines) + "\n"
