"""Reading a node's power through every way it has, and switching it back on.

A node may have a primary BMC, alternative BMCs and SSH. Reading its power tries them in
that order (SSH last); switching it on needs a BMC, and does nothing when any way already
reads it ON. What the journal owes for a power action that began less than one power
deadline ago is still owed: a BMC may apply a change seconds after it accepted it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from harness.errors import PermanentError, PowercutError
from harness.inventory import Inventory
from harness.journal import EntryState, JournalEntry
from harness.power.base import PowerState
from harness.power.factory import available_protocols, driver_for, power_timeout_s


def power_protocol_for_restore(inventory: Inventory, node: str) -> str | None:
    """The protocol that can switch a node on: its primary BMC, else an alternative BMC."""
    spec = inventory.node(node)
    for p in (spec.power, *spec.power_alternatives):
        if p.driver != "ssh":
            return p.driver
    raise PermanentError(
        f"node {node} has no BMC that can power it on (SSH can cut power but not restore it)"
    )


def read_power(
    inventory: Inventory, node: str, *, skip: str | None = None
) -> tuple[PowerState, str, list[str]]:
    """The node's power as its ways read it: the first that reads ON or OFF wins, in the
    order BMCs first (the primary, then the alternatives), SSH last. Returns the state, the
    protocol that read it, and why the others could not ("protocol: error"). ``skip``: a
    protocol already read."""
    spec = inventory.node(node)
    ways = [p for p in available_protocols(spec) if p != "ssh" and p != skip]
    if "ssh" in available_protocols(spec) and skip != "ssh":
        ways.append("ssh")
    errors: list[str] = []
    for proto in ways:
        try:
            driver = driver_for(spec, proto, budgets=inventory.timing_budgets())
        except PowercutError as exc:
            errors.append(f"{proto}: {exc}")
            continue
        try:
            state = driver.state()
        except PowercutError as exc:
            errors.append(f"{proto}: {exc}")
            continue
        finally:
            driver.close()
        if state is not PowerState.UNKNOWN:
            return state, proto, errors
    return PowerState.UNKNOWN, "", errors


_wall = time.time  # the wall clock journal entries are stamped with (tests move it)


def recent_power_actions(
    inventory: Inventory, entries: Iterable[JournalEntry], *, now: float | None = None
) -> dict[str, float]:
    """Nodes with an owed power-on whose power action began less than one power deadline
    (``power_ack`` + ``power_state_verify``) ago and may not have finished (pending or
    failed), with the seconds left. Some BMCs apply a power change seconds after they
    accepted it: until the deadline, reading ON does not show the action did not happen."""
    window = power_timeout_s(inventory.timing_budgets())
    at = _wall() if now is None else now
    left: dict[str, float] = {}
    for e in entries:
        if not e.owes_undo or e.undo.action != "power_on" or e.state is EntryState.DONE:
            continue
        remaining = e.started_at + window - at
        node = str(e.undo.args.get("node", ""))
        if remaining > 0 and node:
            left[node] = max(remaining, left.get(node, 0.0))
    return left


def restore_power(inventory: Inventory, node: str) -> str | None:
    """Power ``node`` on, idempotently: None when it was powered on, a note when it already
    read ON through one of its ways (nothing was done)."""
    try:
        proto: str | None = power_protocol_for_restore(inventory, node)
    except PermanentError as no_bmc:
        state, via, errors = read_power(inventory, node)
        if state is PowerState.ON:
            return f"already on, read through {via}"
        seen = f"it reads {state.value}" + (f" ({'; '.join(errors)})" if errors else "")
        raise PermanentError(f"{no_bmc}; {seen}") from None
    assert proto is not None
    driver = driver_for(inventory.node(node), proto, budgets=inventory.timing_budgets())
    try:
        try:
            state = driver.state()
        except PowercutError as first:
            # The BMC that could power it on does not answer: another way may still see it on.
            other, via, _errors = read_power(inventory, node, skip=proto)
            if other is PowerState.ON:
                return f"already on, read through {via} ({proto} did not answer: {first})"
            raise
        # A driver whose on() also undoes the failures of a running node (kind: a partition,
        # a stopped kubelet) is asked even when the node reads on.
        if state is PowerState.ON and not getattr(driver, "on_restores_running", False):
            return f"already on, read through {proto}"
        driver.on()
        return None
    finally:
        driver.close()
