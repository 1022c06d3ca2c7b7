"""The harness's own time: a scenario's wall time less its waits, by part."""

from __future__ import annotations

import threading

from harness.kube.ledger import BMC, KUBERNETES, Ledger


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_waits_are_not_harness_time_and_parts_name_the_rest() -> None:
    clock = Clock()
    ledger = Ledger(clock)
    with ledger.part("choose targets"):
        clock.now += 0.25
    with ledger.part("Then the node is NotReady"):
        clock.now += 0.5  # evaluating
        with ledger.waiting(KUBERNETES):
            clock.now += 8.0
            with ledger.waiting(BMC):  # nested: counted once, as the outer kind
                clock.now += 1.0
    with ledger.waiting(BMC):
        clock.now += 2.0
    clock.now += 0.125  # outside any part
    summary = ledger.summary()
    assert summary["elapsed_s"] == 11.875
    assert summary["waited_s"] == {"bmc": 2.0, "kubernetes": 9.0}
    assert summary["harness_s"] == 0.875
    assert summary["parts_s"] == {
        "Then the node is NotReady": 0.5,
        "choose targets": 0.25,
        "other": 0.125,
    }
    assert next(iter(summary["parts_s"])) == "Then the node is NotReady"  # slowest first


def test_a_part_inside_a_part_counts_for_the_inner_one_only() -> None:
    clock = Clock()
    ledger = Ledger(clock)
    with ledger.part("teardown"):
        clock.now += 1.0
        with ledger.part("report"):
            clock.now += 2.0
    assert ledger.parts() == {"report": 2.0, "teardown": 1.0}


def test_other_threads_waits_and_parts_do_not_count() -> None:
    clock = Clock()
    ledger = Ledger(clock)

    def beside() -> None:
        with ledger.waiting(KUBERNETES), ledger.part("watch"):
            clock.now += 5.0

    t = threading.Thread(target=beside)
    t.start()
    t.join()
    assert ledger.waited == {} and ledger.parts() == {"other": 5.0}
