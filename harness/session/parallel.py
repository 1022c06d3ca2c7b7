"""Acting on many nodes at once: what happened to each, with its timings, and the runner.

Every power action and every cut of a session runs one function per node on threads,
through :func:`in_parallel`; a :class:`PowerResult` holds when each node's request was sent,
acknowledged and read back, and what failed. A failure of any node is raised once all have
finished, as the first node's error (its type and fields kept) naming every node's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from harness.errors import PermanentError, PowercutError
from harness.journal import shield_signals
from harness.kube.ledger import BMC
from harness.kube.timeline import Timeline, Transition


@dataclass
class PowerResult:
    """What a parallel power operation did, with its timings (monotonic seconds)."""

    nodes: list[str]
    sent: dict[str, float] = field(default_factory=dict)
    acknowledged: dict[str, float] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    confirmed: dict[str, float] = field(default_factory=dict)  # the new state read back
    synchronized: bool = False  # prepared first, then every request released together
    #: A synchronized power cycle's halves, "off" and "on" (``self`` holds the whole
    #: cycle: sent when its power-off was, acknowledged when it read back on).
    phases: dict[str, PowerResult] = field(default_factory=dict)
    #: The harness's actions this operation recorded on the timeline, each node's in the
    #: order it did them (what a failure kind reads its request, acknowledgement, where
    #: the node went down and came back from; nobody re-reads the timeline by name).
    transitions: list[Transition] = field(default_factory=list)

    def first(self, transition: str) -> dict[str, Transition]:
        """Per node, its first recorded ``transition`` (``"power-off sent"``)."""
        out: dict[str, Transition] = {}
        for t in self.transitions:
            if t.transition == transition:
                out.setdefault(t.name, t)
        return out

    @property
    def skew_s(self) -> float:
        """Between the first and the last acknowledgement."""
        acks = list(self.acknowledged.values())
        return max(acks) - min(acks) if len(acks) > 1 else 0.0

    @property
    def sent_spread_s(self) -> float:
        """Between the first and the last request sent."""
        sent = list(self.sent.values())
        return max(sent) - min(sent) if len(sent) > 1 else 0.0

    @property
    def request_to_ack_s(self) -> dict[str, float]:
        """Per node: request sent -> acknowledged."""
        return {n: a - self.sent[n] for n, a in self.acknowledged.items() if n in self.sent}

    @property
    def first_ack(self) -> float:
        return min(self.acknowledged.values())


def with_message(exc: PowercutError, message: str) -> PowercutError:
    """The same error, of the same type and with the same fields, telling ``message``. Its
    constructor is not called: some want more than a message (``WaitTimeout``, ``ApiError``),
    and a crash here would hide the BMCs' answers behind a TypeError."""
    new = type(exc).__new__(type(exc), message)
    new.__dict__.update(exc.__dict__)
    new.args = (message,)
    return new


def raise_failures(
    result: PowerResult, what: str, errors: Mapping[str, BaseException | None]
) -> None:
    """Raise what failed, if anything did (``result.errors``): the first failed node's error
    (``errors``: each node's), of its type and with its fields when it is a PowercutError,
    telling every node's."""
    if not result.errors:
        return
    detail = "; ".join(f"{n}: {e}" for n, e in result.errors.items())
    first = errors[next(iter(result.errors))]
    if isinstance(first, PowercutError):
        raise with_message(
            first, f"{what} failed for {len(result.errors)} node(s): {detail}"
        ) from first
    raise PermanentError(f"{what} failed: {detail}") from first


def in_parallel(
    names: list[str],
    fn: Callable[[str], None],
    result: PowerResult,
    what: str,
    *,
    timeline: Timeline,
    tell: Callable[[str], None],
    workers: int = 16,
) -> None:
    """Run ``fn`` for each node on at most ``workers`` threads, telling each failure as it
    happens (``tell``: safe from any thread); once all have finished, record what failed in
    ``result.errors`` and raise it (:func:`raise_failures`)."""

    def run(node: str) -> None:
        started = time.monotonic()
        try:
            fn(node)
        except Exception as exc:
            tell(f"{node}: {what} FAILED after {time.monotonic() - started:.1f} s: {exc}")
            raise

    pool = ThreadPoolExecutor(max_workers=max(1, min(workers, len(names))))
    futures = {n: pool.submit(run, n) for n in names}
    try:
        with timeline.ledger.waiting(BMC):  # the BMCs' answers and read-backs
            wait(futures.values())
    except BaseException:
        # Interrupted (Ctrl-C, SIGTERM): let the BMC calls in flight finish first, so
        # the undos that run next act after them, not in between.
        with shield_signals():
            wait(futures.values())
        raise
    finally:
        pool.shutdown(wait=True)
    for n, fut in futures.items():
        exc = fut.exception()
        if exc is not None:
            result.errors[n] = str(exc)
    raise_failures(result, what, {n: fut.exception() for n, fut in futures.items()})
