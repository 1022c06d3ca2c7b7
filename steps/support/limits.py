"""Time limits as written in feature files: a named budget or a literal number of seconds.

``within the node-not-ready budget`` resolves against the scenario's
:class:`~harness.budgets.Budgets` (the inventory's profile and overrides); ``within 90
seconds`` is taken literally. Steps never contain numbers: they receive a :class:`Limit`
from the parser and ask it for seconds.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Final

from harness.budgets import Budgets, canonical_budget_name
from harness.failures import FailureKind
from harness.scenario.targets.select import Amount
from harness.scenario.targets.subjects import SubjectKind

#: What a limit looks like in a step: ``the <name> budget`` or ``<n> second(s)``.
LIMIT_PATTERN: Final = r"the [a-z][a-z-]* budget|\d+(?:\.\d+)? seconds?"
_LITERAL = re.compile(r"^(\d+(?:\.\d+)?) seconds?$")


@dataclass(frozen=True)
class Limit:
    """A time limit from a step: ``budget`` (canonical name) or ``literal_s``."""

    text: str
    budget: str | None = None
    literal_s: float | None = None

    def seconds(self, budgets: Budgets) -> float:
        """The limit in seconds (an unknown budget name raises ``ConfigError`` naming the
        valid ones)."""
        if self.literal_s is not None:
            return self.literal_s
        return budgets.get(canonical_budget_name(self.text))

    def __str__(self) -> str:
        return self.text


class _LimitType:
    """Converter for ``{limit:Limit}`` in step sentences (``parse`` reads ``pattern``)."""

    pattern: Final = LIMIT_PATTERN
    __name__ = "Limit"

    def __call__(self, text: str) -> Limit:
        literal = _LITERAL.match(text)
        if literal:
            return Limit(text, literal_s=float(literal.group(1)))
        return Limit(text, budget=text.removeprefix("the ").removesuffix(" budget"))


parse_limit: Final = _LimitType()

#: What an amount looks like in a step: a count, a fraction or a range (see
#: :mod:`harness.scenario.targets.select`).
AMOUNT_PATTERN: Final = (
    r"\d+(?:\s*/\s*\d+|\s*-\s*\d+|%)?"
    r"|(?:zero|no|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
    r"(?:[ -](?:half|halves|thirds?|quarters?|fourths?)|-(?:zero|one|two|three|four|five|six"
    r"|seven|eight|nine|ten|eleven|twelve))?"
    r"|all|every"
)


class _AmountType:
    """Converter for ``{amount:Amount}``: ``one``, ``3``, ``one-third``, ``all``, ``1-2``."""

    pattern: Final = AMOUNT_PATTERN
    __name__ = "Amount"

    def __call__(self, text: str) -> Amount:
        return Amount.parse(text)


parse_amount: Final = _AmountType()


class Subject(enum.Enum):
    """Which pods a step is about: every lost pod, or the one a subject phrase names (the
    StatefulSet member, the singleton: see :mod:`harness.scenario.targets.subjects`)."""

    LOST = "lost"
    MEMBER = "member"
    SINGLETON = "singleton"

    @property
    def kind(self) -> SubjectKind:
        """The subject kind of ``MEMBER`` / ``SINGLETON``."""
        return SubjectKind(self.value)


class _SubjectType:
    """One sentence for both: ``{pods:Pods}`` reads "every lost pod" or "the singleton"
    (and the other wordings below) as a :class:`Subject`."""

    def __init__(
        self,
        name: str,
        lost: tuple[str, ...],
        member: tuple[str, ...],
        singleton: tuple[str, ...],
    ) -> None:
        self.__name__ = name
        self.words = {
            **dict.fromkeys(lost, Subject.LOST),
            **dict.fromkeys(member, Subject.MEMBER),
            **dict.fromkeys(singleton, Subject.SINGLETON),
        }
        self.pattern = "|".join(re.escape(w) for w in sorted(self.words, key=len, reverse=True))

    def __call__(self, text: str) -> Subject:
        return self.words[text]


#: The wordings of a step's subject, by type.
SUBJECT_TYPES: Final = {
    "Pods": _SubjectType("Pods", ("every lost pod",), ("the member",), ("the singleton",)),
    "Pods_": _SubjectType("Pods_", ("every lost pod's",), ("the member's",), ("the singleton's",)),
    "Volumes": _SubjectType(
        "Volumes",
        ("every ReadWriteOnce volume of a lost pod", "the ReadWriteOnce volumes of the lost pods"),
        ("the member's volume",),
        ("the singleton's volume", "the singleton's replacement"),
    ),
    "One": _SubjectType("One", (), ("the member",), ("the singleton",)),
}


class _FailureType:
    """Converter for ``{failure:Failure}``: one of :class:`FailureKind`'s words (``power``,
    ``graceful``, ``reboot``, ``partition``, ``kubelet``); any other word is a
    ``ValueError`` listing them, found when the features are checked, before anything runs."""

    pattern: Final = r"[\w-]+"
    __name__ = "Failure"

    def __call__(self, text: str) -> FailureKind:
        return FailureKind.parse(text)


parse_failure: Final = _FailureType()

#: ``extra_types`` for :func:`pytest_bdd.parsers.parse`.
TYPES: Final = {
    "Limit": parse_limit,
    "Amount": parse_amount,
    "Failure": parse_failure,
    **SUBJECT_TYPES,
}
