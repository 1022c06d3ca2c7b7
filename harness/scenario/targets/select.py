"""Targets by name, label selector, role, rack, count, fraction or range, drawn from a seed.

The words a feature (or ``powercut longevity``) uses for "how many":

- a count: ``zero`` ... ``twelve``, or digits (``3``);
- a fraction of the candidates: ``one-third`` / ``one third``, ``one-half``, ``two-thirds``,
  ``one-quarter``, ``all`` / ``every``, or ``1/3``; rounded up, at least one unless it is
  zero (Dell's resiliency suite fails "one-third" of the workers this way);
- a range ``1-2`` (or ``one-two``): a count drawn from the scenario's seed.

:func:`select_nodes` filters the inventory's nodes (role, rack, names, a label selector the
API server evaluates) down to the Ready ones, then draws the amount from the seeded random
generator, spread over the racks in turn. The :class:`Selection` says what it chose, out of
what, and why; the same seed draws the same nodes again (``powercut run --seed N``).
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from harness.errors import ConfigError
from harness.inventory import Inventory, NodeSpec
from harness.scenario.errors import NoTargets

WORDS: dict[str, int] = {
    "zero": 0,
    "no": 0,
    "one": 1,
    "a": 1,
    "an": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}
FRACTION_WORDS: dict[str, Fraction] = {
    "half": Fraction(1, 2),
    "halves": Fraction(1, 2),
    "third": Fraction(1, 3),
    "thirds": Fraction(1, 3),
    "quarter": Fraction(1, 4),
    "quarters": Fraction(1, 4),
    "fourth": Fraction(1, 4),
    "fourths": Fraction(1, 4),
}
ALL_WORDS = frozenset({"all", "every", "all the", "each"})

_RANGE = re.compile(r"^(\w+)\s*(?:-|to|\.\.)\s*(\w+)$")
_SLASH = re.compile(r"^(\d+)\s*/\s*(\d+)$")
_PERCENT = re.compile(r"^(\d+(?:\.\d+)?)\s*%$")
_WORD_FRACTION = re.compile(r"^(\w+)[\s-]+(half|halves|thirds?|quarters?|fourths?)$")

VALID = (
    "a count (zero..twelve or digits), a fraction (one-third, one-half, two-thirds, all, "
    "1/3, 50%) or a range (1-2, one-two)"
)


def _count(word: str) -> int | None:
    w = word.strip().lower()
    if w.isdigit():
        return int(w)
    return WORDS.get(w)


@dataclass(frozen=True)
class Amount:
    """How many targets: exactly ``count``, a ``fraction`` of the candidates, or a count
    drawn from ``low``..``high``. ``text`` is how the feature wrote it."""

    text: str
    count: int | None = None
    fraction: Fraction | None = None
    low: int | None = None
    high: int | None = None

    @classmethod
    def parse(cls, text: str) -> Amount:
        """``text`` as an amount; else a :class:`ConfigError` listing what is valid."""
        t = " ".join(text.strip().lower().split())
        if (n := _count(t)) is not None:
            return cls(text, count=n)
        if t in ALL_WORDS:
            return cls(text, fraction=Fraction(1))
        if m := _SLASH.match(t):
            if int(m[2]) == 0 or int(m[1]) > int(m[2]):
                raise ConfigError(f"amount {text!r}: a fraction must be in [0, 1]; {VALID}")
            return cls(text, fraction=Fraction(int(m[1]), int(m[2])))
        if m := _PERCENT.match(t):
            value = Fraction(m[1]) / 100
            if value > 1:
                raise ConfigError(f"amount {text!r}: more than 100%; {VALID}")
            return cls(text, fraction=value)
        if (m := _WORD_FRACTION.match(t)) and (n := _count(m[1])) is not None:
            value = n * FRACTION_WORDS[m[2]]
            if value > 1:
                raise ConfigError(f"amount {text!r}: more than all of them; {VALID}")
            return cls(text, fraction=value)
        if m := _RANGE.match(t):
            lo, hi = _count(m[1]), _count(m[2])
            if lo is not None and hi is not None:
                if lo > hi:
                    raise ConfigError(f"amount {text!r}: a range runs low-high; {VALID}")
                return cls(text, low=lo, high=hi)
        raise ConfigError(f"amount {text!r} is not understood; valid: {VALID}")

    def resolve(self, candidates: int, rng: random.Random) -> int:
        """How many of ``candidates``: a fraction rounds up (at least one unless zero); a
        range draws from ``rng``. Asking for more than there are raises :class:`NoTargets`."""
        if self.fraction is not None:
            want = math.ceil(self.fraction * candidates)
        elif self.low is not None and self.high is not None:
            want = rng.randint(self.low, self.high)
        else:
            want = self.count or 0
        if want > candidates:
            raise NoTargets(
                f"{self.text!r} asks for {want}, but only {candidates} fit in this cluster"
            )
        return want

    def describe(self, resolved: int, candidates: int) -> str:
        if self.low is not None:
            return f"{resolved} (drawn from {self.low}-{self.high}) of {candidates}"
        if self.fraction is not None:
            return f"{resolved} ({self.text}) of {candidates}"
        return f"{resolved} of {candidates}"


@dataclass(frozen=True)
class Selection:
    """Nodes chosen for a scenario, and why: the filter, the amount, the seed."""

    nodes: tuple[str, ...]
    why: str
    seed: int | None = None
    candidates: tuple[str, ...] = ()

    def describe(self) -> str:
        seed = f"; seed {self.seed}" if self.seed is not None else ""
        return f"{', '.join(self.nodes) or 'no node'} ({self.why}{seed})"


def parse_names(text: str) -> list[str]:
    """``"w-a1, w-b1 and w-c1"`` (quotes optional) as node names."""
    parts = re.split(r",|\band\b|\s+", text.replace('"', " ").replace("'", " "))
    return [p for p in (x.strip() for x in parts) if p]


def spread_over_racks(nodes: Sequence[NodeSpec], rng: random.Random) -> list[NodeSpec]:
    """``nodes`` shuffled by ``rng``, then dealt one rack at a time, so the first k of the
    result spread over as many racks as they can."""
    by_rack: dict[str, list[NodeSpec]] = {}
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    for n in shuffled:
        by_rack.setdefault(n.rack or "", []).append(n)
    racks = sorted(by_rack)
    rng.shuffle(racks)
    out: list[NodeSpec] = []
    while any(by_rack.values()):
        for rack in racks:
            if by_rack[rack]:
                out.append(by_rack[rack].pop(0))
    return out


def select_nodes(
    inventory: Inventory,
    *,
    amount: Amount,
    rng: random.Random,
    seed: int | None = None,
    role: str | None = None,
    rack: str | None = None,
    names: Iterable[str] | None = None,
    label_selector: str | None = None,
    labelled: Callable[[str], set[str]] | None = None,
    usable: Callable[[str], bool] | None = None,
    exclude: Iterable[str] = (),
) -> Selection:
    """Draw ``amount`` nodes from the inventory's nodes that match every filter given.

    ``labelled(selector)`` answers which node names a label selector matches (the API
    server evaluates it); ``usable(name)`` says whether a node may be failed now (Ready,
    schedulable). A filter that names what the inventory does not have is a
    :class:`ConfigError`; a cluster where too few nodes fit raises :class:`NoTargets`.
    """
    pool = list(inventory.nodes)
    what: list[str] = []
    if role is not None:
        of_role = {n.name for n in inventory.nodes_by_role(role)}  # checks the role
        pool = [n for n in pool if n.name in of_role]
        what.append(f"role {role}")
    if rack is not None:
        in_rack = {n.name for n in inventory.nodes_in_rack(rack)}
        pool = [n for n in pool if n.name in in_rack]
        what.append(f"rack {rack}")
    if names is not None:
        wanted = list(names)
        known = {n.name for n in inventory.nodes}
        unknown = [w for w in wanted if w not in known]
        if unknown:
            raise ConfigError(
                f"no node named {', '.join(unknown)} in the inventory; nodes: "
                f"{', '.join(sorted(known))}",
                field="nodes",
            )
        pool = [n for n in pool if n.name in wanted]
        what.append("named " + ", ".join(wanted))
    if label_selector is not None:
        if labelled is None:
            raise ConfigError("a label selector needs the cluster to evaluate it")
        matching = labelled(label_selector)
        pool = [n for n in pool if n.name in matching]
        what.append(f"labelled {label_selector}")
    excluded = set(exclude)
    pool = [n for n in pool if n.name not in excluded]
    filt = ", ".join(what) or "any role"
    ready = [n for n in pool if usable is None or usable(n.name)]
    if usable is not None and len(ready) < len(pool):
        down = sorted({n.name for n in pool} - {n.name for n in ready})
        what_down = f"; not Ready or cordoned now: {', '.join(down)}"
    else:
        what_down = ""
    if not pool:
        raise NoTargets(f"no node of this inventory matches: {filt}")
    want = amount.resolve(len(ready), rng)
    if names is not None and amount.fraction == 1 and len(ready) < len(pool):
        raise NoTargets(f"the nodes {filt} are not all Ready{what_down}")
    chosen = spread_over_racks(ready, rng)[:want]
    chosen_names = tuple(sorted(n.name for n in chosen))
    why = f"{amount.describe(want, len(ready))} nodes ({filt}), spread over racks{what_down}"
    return Selection(chosen_names, why, seed, tuple(sorted(n.name for n in ready)))
