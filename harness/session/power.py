"""The session's power actions: off, on and cycle, on many nodes at once.

A power-off or a power cycle of several nodes is synchronized by default, as a PDU or a
rack's feed failing: every node's request is prepared first (connection, authentication,
discovery, current state), then a barrier releases them together
(:class:`harness.power.volley.Volley`), and only then are the new states read back. Each
node is journaled, with a power-on as its undo, before its request is sent; each request,
acknowledgement and read-back is put on the timeline, and the skew between the first and
the last acknowledgement too.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from harness.errors import PermanentError, not_acted
from harness.journal import UndoSpec
from harness.kube.ledger import BMC
from harness.kube.names import Act, Event, Stage
from harness.kube.timeline import ACTION
from harness.power.base import PowerState, PreparedPower, Unprepared, prepare_off, prepare_on
from harness.power.volley import Volley
from harness.session.core import SessionCore
from harness.session.parallel import PowerResult, in_parallel, raise_failures
from harness.session.restore import power_protocol_for_restore, restore_power


def _ms(seconds: float) -> float:
    """Seconds in milliseconds, to a tenth."""
    return round(seconds * 1000, 1)


class PowerActions(SessionCore):
    """Power the nodes off, on, or cycle them, journaled and checked against the
    blast-radius rules."""

    def power_off(
        self,
        nodes: Iterable[str],
        *,
        graceful: bool = False,
        protocol: str | None = None,
        synchronized: bool = True,
    ) -> PowerResult:
        """Power the nodes off together; returns once every BMC acknowledged and the new
        state was read back.

        Synchronized (the default), as a PDU failing cuts a rack at once: every node's
        connection, authentication, system discovery (Redfish) or session (IPMI) and
        current state are prepared first, in parallel; then a barrier releases every request
        together, and only then are the new states read back. If one node cannot be
        prepared, no request is sent (the others are journaled as not done). Drivers that
        cannot prepare (SSH, plugins) run their whole power-off when released. The skew
        between the first and last acknowledgement is kept (``PowerResult.skew_s``) and put
        on the timeline. ``synchronized=False``: the earlier way, each node's whole
        power-off (connect, authenticate, discover, send, read back) started in parallel."""
        names = list(nodes)
        plan = self._check_blast_radius(names, "power off")
        how = "graceful" if graceful else "forced"
        if self.dry_run:
            for n in names:
                proto = protocol or self.inventory.node(n).power.driver
                self.plan.append(f"power off {n} ({how}) through {proto}; undo: power on")
            self.plan.extend(plan.describe())
            return PowerResult(names)
        result = PowerResult(names, synchronized=synchronized)
        with self.timeline.ledger.waiting(BMC):
            if synchronized:
                self._volley_off(names, graceful, protocol, result)
            else:
                self._unsynchronized_off(names, graceful, protocol, result)
        self.last_power = result
        skews = {"skew_ms": _ms(result.skew_s), "sent_spread_ms": _ms(result.sent_spread_s)}
        self._record_skew(names, Event.POWER_OFF_SKEW, skews, synchronized=synchronized)
        self.say(f"powered off {', '.join(names)} ({how}); ack skew {result.skew_s * 1000:.0f} ms")
        return result

    def _volley_off(
        self, names: list[str], graceful: bool, protocol: str | None, result: PowerResult
    ) -> None:
        """The synchronized power-off on bounded threads (:class:`harness.power.volley.Volley`):
        each node journaled before its request, every request released together, each
        stamp put on the timeline, failures raised as
        :func:`~harness.session.parallel.in_parallel` does."""
        assert self.undo is not None
        undo = self.undo
        entries: dict[str, contextlib.AbstractContextManager[Any]] = {}
        entries_lock = threading.Lock()

        def before(node: str) -> None:
            self.check_stop()
            entry = undo.disruption("power_off", f"node/{node}", undo=UndoSpec.power_on(node))
            self._entries[("power_off", f"node/{node}")] = entry.__enter__().id
            with entries_lock:
                entries[node] = entry

        volley = Volley(before=before)
        shots = volley.run(
            names, lambda node: prepare_off(self.driver(node, protocol), graceful=graceful)
        )
        for node, shot in shots.items():
            stamps: tuple[tuple[Stage, float | None, dict[str, Any]], ...] = (
                (Stage.SENT, shot.sent, {"graceful": graceful, "protocol": protocol or ""}),
                (Stage.ACKNOWLEDGED, shot.acknowledged, {}),
                (Stage.CONFIRMED, shot.confirmed, {}),
            )
            for stage, mono, detail in stamps:
                if mono is not None:
                    result.transitions.append(
                        self.timeline.record(
                            ACTION, node, Act.POWER_OFF.at(stage), detail=detail, mono=mono
                        )
                    )
            if shot.sent is not None:
                result.sent[node] = shot.sent
            if shot.acknowledged is not None and shot.error is None:
                result.acknowledged[node] = shot.acknowledged
            if shot.confirmed is not None:
                result.confirmed[node] = shot.confirmed
            entry = entries.get(node)
            error = shot.error
            if entry is not None:
                try:
                    if error is None:
                        entry.__exit__(None, None, None)
                    else:
                        entry.__exit__(type(error), error, error.__traceback__)
                except BaseException as exc:  # noqa: BLE001 (the journal re-raises the error)
                    error = exc
            if error is None:
                self.down.add(node)
                self._told(result, node, "power-off", PowerState.OFF)
            else:
                result.errors[node] = str(error)
                self._tell(f"{node}: power off FAILED: {error}")
        raise_failures(result, "power off", {n: shot.error for n, shot in shots.items()})

    def _unsynchronized_off(
        self, names: list[str], graceful: bool, protocol: str | None, result: PowerResult
    ) -> None:
        """The earlier way: each node's whole power-off started in parallel."""

        def one(node: str) -> None:
            driver = self.driver(node, protocol)

            def act() -> None:
                prepared = Unprepared(driver, graceful)
                self._fire(node, prepared, result, Act.POWER_OFF, protocol, graceful=graceful)

            self._journaled("power_off", f"node/{node}", UndoSpec.power_on(node), act)
            self.down.add(node)
            self._told(result, node, "power-off", PowerState.OFF)

        in_parallel(
            names,
            one,
            result,
            "power off",
            workers=len(names),
            timeline=self.timeline,
            tell=self._tell,
        )

    def power_on(self, nodes: Iterable[str], *, protocol: str | None = None) -> PowerResult:
        names = list(nodes)
        if self.dry_run:
            self.plan.extend(f"power on {n}" for n in names)
            return PowerResult(names)
        result = PowerResult(names)

        def one(node: str) -> None:
            proto = protocol if protocol not in (None, "ssh") else None
            if proto is None:
                try:
                    proto = power_protocol_for_restore(self.inventory, node)
                except PermanentError:
                    # No BMC can switch it on; if it reads ON anyway, nothing is owed.
                    note = restore_power(self.inventory, node)  # raises unless it reads ON
                    self._power_restored(node, note=note)
                    self._tell(f"{node}: {note}; nothing to do")
                    return
            driver = self.driver(node, proto)
            result.sent[node] = time.monotonic()
            result.transitions.append(self.timeline.action(node, Act.POWER_ON.at(Stage.SENT)))
            driver.on()
            result.acknowledged[node] = time.monotonic()
            result.transitions.append(
                self.timeline.action(node, Act.POWER_ON.at(Stage.ACKNOWLEDGED))
            )
            self._power_restored(node)
            self._told(result, node, "power-on", PowerState.ON)

        in_parallel(names, one, result, "power on", timeline=self.timeline, tell=self._tell)
        self.say(f"powered on {', '.join(names)}")
        return result

    def power_cycle(
        self,
        nodes: Iterable[str],
        *,
        protocol: str | None = None,
        synchronized: bool | None = None,
        off_s: float = 0.0,
    ) -> PowerResult:
        """Power-cycle the nodes in parallel (off, then on again: a reset).

        ``off_s`` > 0: each node's power stays off that long, from its power-off's read-back
        to its power-on request (the cycle is then always the synchronized off and on, since
        no BMC's own reset can hold the power off).

        Checked against the blast-radius rules like a power-off (the nodes are down
        meanwhile) and journaled with a power-on as its undo, since a cycle that fails
        midway can leave a node off. Each entry is marked undone once the node read back
        as on.

        Synchronized (the default for several nodes), as a rack's power failing and coming
        back: the
        power-off is prepared, released together at a barrier and confirmed as in
        :meth:`power_off`; then the power-on likewise (prepared once every node read back
        off). The result holds the whole cycle per node (``power-cycle sent`` to
        ``power-cycle acknowledged``, once it read back on), its ``phases`` the power-off and
        the power-on; the skew of both goes on the timeline (``power-cycle ack skew``). A
        node whose power-on cannot wait for the others' (one failed) is powered on by itself
        at once: a cycle never leaves a node off. ``synchronized=False`` (the default for
        one node): each node's driver ``cycle()`` (the BMC's own reset: PowerCycle,
        ForceRestart, chassis power cycle), in parallel.
        """
        names = list(nodes)
        plan = self._check_blast_radius(names, "power cycle")
        if self.dry_run:
            for n in names:
                proto = protocol or self.inventory.node(n).power.driver
                held = f" (off for {off_s:g}s)" if off_s > 0 else ""
                self.plan.append(
                    f"power-cycle {n}{held} through {proto}; undo if it stops midway: power on"
                )
            self.plan.extend(plan.describe())
            return PowerResult(names)
        if synchronized is None:
            synchronized = len(names) > 1
        if synchronized or off_s > 0:
            return self._synchronized_cycle(names, protocol, off_s)
        result = PowerResult(names)

        def one(node: str) -> None:
            driver = self.driver(node, protocol)
            target = f"node/{node}"

            def act() -> None:
                result.sent[node] = time.monotonic()
                result.transitions.append(
                    self.timeline.action(
                        node, Act.POWER_CYCLE.at(Stage.SENT), protocol=protocol or ""
                    )
                )
                driver.cycle()  # returns once the node reads back as on
                result.acknowledged[node] = time.monotonic()
                result.transitions.append(
                    self.timeline.action(node, Act.POWER_CYCLE.at(Stage.ACKNOWLEDGED))
                )

            self._journaled("power_cycle", target, UndoSpec.power_on(node), act)
            self._undone("power_cycle", target)
            self._told(result, node, "power cycle", PowerState.ON)

        in_parallel(names, one, result, "power cycle", timeline=self.timeline, tell=self._tell)
        self.last_power = result
        self.say(f"power-cycled {', '.join(names)}")
        return result

    def _synchronized_cycle(
        self, names: list[str], protocol: str | None, off_s: float = 0.0
    ) -> PowerResult:
        off = PowerResult(names, synchronized=True)
        on = PowerResult(names, synchronized=True)
        cycle = PowerResult(names, synchronized=True, phases={"off": off, "on": on})
        off_barrier = threading.Barrier(len(names))
        on_barrier = threading.Barrier(len(names))

        def released(
            node: str, prepare: Callable[[], PreparedPower], barrier: threading.Barrier
        ) -> PreparedPower:
            try:
                prepared = prepare()
            except BaseException:
                barrier.abort()
                raise
            barrier.wait()  # BrokenBarrierError: another node could not be prepared
            return prepared

        def one(node: str) -> None:
            driver = self.driver(node, protocol)
            target = f"node/{node}"

            def act() -> None:
                try:
                    try:
                        prepared = released(node, lambda: prepare_off(driver), off_barrier)
                    except threading.BrokenBarrierError:
                        raise not_acted(
                            PermanentError(
                                f"{node}: power cycle not started: another node of the same "
                                "cycle could not be prepared"
                            )
                        ) from None
                    cycle.sent[node] = time.monotonic()
                    cycle.transitions.append(
                        self.timeline.action(
                            node, Act.POWER_CYCLE.at(Stage.SENT), protocol=protocol or ""
                        )
                    )
                    self._fire(node, prepared, off, Act.POWER_CYCLE_OFF, protocol, log=cycle)
                    if off_s > 0:
                        cycle.transitions.append(
                            self.timeline.action(node, Event.POWER_CYCLE_HELD_OFF, seconds=off_s)
                        )
                        time.sleep(max(0.0, off.confirmed[node] + off_s - time.monotonic()))
                except BaseException:
                    on_barrier.abort()  # the others power on without waiting for this one
                    raise
                try:
                    prepared = released(node, lambda: prepare_on(driver), on_barrier)
                except threading.BrokenBarrierError:
                    prepared = prepare_on(driver)  # on by itself: never left off
                self._fire(node, prepared, on, Act.POWER_CYCLE_ON, protocol, log=cycle)
                cycle.acknowledged[node] = time.monotonic()
                cycle.transitions.append(
                    self.timeline.action(node, Act.POWER_CYCLE.at(Stage.ACKNOWLEDGED))
                )

            self._journaled("power_cycle", target, UndoSpec.power_on(node), act)
            self._undone("power_cycle", target)
            self._told(cycle, node, "power cycle", PowerState.ON)

        try:
            in_parallel(
                names,
                one,
                cycle,
                "power cycle",
                workers=len(names),
                timeline=self.timeline,
                tell=self._tell,
            )
        finally:
            self.last_power = cycle
        skews = {"off_skew_ms": _ms(off.skew_s), "on_skew_ms": _ms(on.skew_s)}
        self._record_skew(names, Event.POWER_CYCLE_SKEW, skews, synchronized=True)
        self.say(
            f"power-cycled {', '.join(names)}; ack skew off {off.skew_s * 1000:.0f} ms, "
            f"on {on.skew_s * 1000:.0f} ms"
        )
        return cycle

    def _fire(
        self,
        node: str,
        prepared: PreparedPower,
        result: PowerResult,
        what: Act,
        protocol: str | None,
        *,
        log: PowerResult | None = None,
        **detail: Any,
    ) -> None:
        """Send a prepared request and read the new state back, each step on the timeline
        and in ``log``'s transitions (``result``'s by default; ``detail``: more for the
        request's)."""
        into = (result if log is None else log).transitions
        result.sent[node] = time.monotonic()
        into.append(
            self.timeline.action(node, what.at(Stage.SENT), **detail, protocol=protocol or "")
        )
        prepared.fire()
        result.acknowledged[node] = time.monotonic()
        into.append(self.timeline.action(node, what.at(Stage.ACKNOWLEDGED)))
        prepared.confirm()
        result.confirmed[node] = time.monotonic()
        into.append(self.timeline.action(node, what.at(Stage.CONFIRMED)))

    def _record_skew(
        self, names: list[str], event: str, skews: dict[str, float], *, synchronized: bool
    ) -> None:
        """Put the skews of a power action on several nodes on the timeline, at its first
        node (none for one node)."""
        if len(names) > 1:
            detail: dict[str, Any] = {**skews, "nodes": ",".join(names)}
            self.timeline.action(names[0], event, **detail, synchronized=synchronized)

    def _told(self, result: PowerResult, node: str, what: str, state: PowerState) -> None:
        """Tell one node's acknowledgement (with its read-back) as soon as it arrived."""
        took = result.acknowledged[node] - result.sent[node]
        self._tell(f"{node}: {what} acknowledged after {took:.1f} s, state {state.name}")
