"""The longevity loop with a fake cycle runner: stopping, resuming, the JSONL file."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from harness.budgets import PROFILES
from harness.errors import ConfigError, TemporaryError
from harness.longevity.engine import Engine, SteadyStateLost, StopControl
from harness.longevity.groups import Group
from harness.longevity.records import (
    CYCLES_FILE,
    CycleLog,
    CycleRecord,
    PhaseBudgets,
    read_log,
)

GROUPS = [Group("g1", ("w-a1",)), Group("g2", ("w-a2",)), Group("g3", ("w-a3",))]


def record(cycle: int, group: Group, status: str = "passed", **kw: object) -> CycleRecord:
    start = 1_700_000_000.0 + cycle * 100
    return CycleRecord(
        cycle=cycle,
        group=group.name,
        nodes=list(group.nodes),
        status=status,  # type: ignore[arg-type]
        started_at=start,
        ended_at=start + 60,
        phases={"not_ready": 9.0, "recovery": 20.0 + cycle},
        budgets={"not_ready": 20.0, "recovery": 85.0},
        misses=["recovery"] if status == "missed" else [],
        reason=str(kw.get("reason", "")),
    )


class FakeRunner:
    """Records which cycles ran; ``hooks[n]`` runs during cycle ``n``."""

    def __init__(self, statuses: dict[int, str] | None = None) -> None:
        self.ran: list[tuple[int, str]] = []
        self.statuses = statuses or {}
        self.hooks: dict[int, Callable[[], object]] = {}

    def run_cycle(self, cycle: int, group: Group) -> CycleRecord | None:
        self.ran.append((cycle, group.name))
        hook = self.hooks.get(cycle)
        if hook is not None and hook() == "skip":
            return None
        return record(cycle, group, self.statuses.get(cycle, "passed"), reason="r")


def engine(
    tmp_path: Path, runner: FakeRunner, stop: StopControl | None = None, **kw: object
) -> tuple[Engine, CycleLog, StopControl]:
    log = CycleLog(tmp_path / CYCLES_FILE)
    stop = stop or StopControl(tmp_path / "STOP", say=lambda _m: None)
    eng = Engine(
        runner=runner,
        groups=GROUPS,
        cycle_log=log,
        stop=stop,
        say=lambda _m: None,
        **kw,  # type: ignore[arg-type]
    )
    return eng, log, stop


def test_runs_the_cycles_rotating_groups_and_records_each(tmp_path: Path) -> None:
    runner = FakeRunner()
    eng, log, _ = engine(tmp_path, runner, cycles=4)
    result = eng.run()
    log.close()
    assert runner.ran == [(1, "g1"), (2, "g2"), (3, "g3"), (4, "g1")]
    assert result.reason == "4 cycles done" and result.cycles_run == 4
    assert result.statuses == {"passed": 4}
    got = read_log(tmp_path / CYCLES_FILE)
    assert [c.cycle for c in got.cycles] == [1, 2, 3, 4]
    assert got.last_stop is not None and got.last_stop["reason"] == "4 cycles done"


def test_a_missed_budget_is_recorded_and_the_run_goes_on(tmp_path: Path) -> None:
    runner = FakeRunner({2: "missed"})
    eng, _log, _ = engine(tmp_path, runner, cycles=3)
    result = eng.run()
    assert result.statuses == {"passed": 2, "missed": 1} and not result.failed
    assert [c.status for c in read_log(tmp_path / CYCLES_FILE).cycles] == [
        "passed",
        "missed",
        "passed",
    ]


def test_a_cycle_that_could_not_restore_steady_state_stops_the_run(tmp_path: Path) -> None:
    runner = FakeRunner({2: "failed"})
    eng, _, _ = engine(tmp_path, runner, cycles=5)
    result = eng.run()
    assert [n for n, _ in runner.ran] == [1, 2]
    assert result.failed and result.reason.startswith("cycle 2 could not restore")


def test_an_unsteady_cluster_before_a_cycle_stops_the_run(tmp_path: Path) -> None:
    runner = FakeRunner()

    def unsteady() -> None:
        raise SteadyStateLost(3, "node w-a3 Ready=False", 90.0)

    runner.hooks[3] = unsteady
    eng, _, _ = engine(tmp_path, runner, cycles=5)
    result = eng.run()
    assert result.failed and result.last_cycle == 2
    assert "not in its steady state before cycle 3" in result.reason


def test_the_stop_file_ends_the_run_between_cycles_and_is_removed(tmp_path: Path) -> None:
    runner = FakeRunner()
    runner.hooks[2] = lambda: (tmp_path / "STOP").write_text("")
    eng, _, _ = engine(tmp_path, runner)
    result = eng.run()
    assert [n for n, _ in runner.ran] == [1, 2]
    assert result.reason == f"stop file {tmp_path / 'STOP'}"
    assert not (tmp_path / "STOP").exists()
    assert not result.interrupted


def test_first_signal_lets_the_cycle_finish_and_record(tmp_path: Path) -> None:
    runner = FakeRunner()
    runner.hooks[2] = lambda: os.kill(os.getpid(), signal.SIGTERM)
    eng, _, stop = engine(tmp_path, runner)
    with stop.handlers():
        result = eng.run()
    assert [n for n, _ in runner.ran] == [1, 2]
    assert result.last_cycle == 2 and result.interrupted
    assert result.reason == "SIGTERM received"
    assert [c.cycle for c in read_log(tmp_path / CYCLES_FILE).cycles] == [1, 2]


def test_a_second_signal_stops_at_once_and_drops_the_cycle(tmp_path: Path) -> None:
    runner = FakeRunner()

    def twice() -> None:
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)

    runner.hooks[2] = twice
    eng, _, stop = engine(tmp_path, runner)
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN when started in the background
    with stop.handlers(), pytest.raises(KeyboardInterrupt):
        eng.run()
    got = read_log(tmp_path / CYCLES_FILE)
    assert [c.cycle for c in got.cycles] == [1]
    assert got.last_stop is not None and got.last_stop["interrupted"]
    assert got.last_stop["reason"].startswith("interrupted during cycle 2")
    assert "that cycle is not recorded" in got.last_stop["reason"]
    assert signal.getsignal(signal.SIGINT) == before, "the previous handler is restored"


def test_a_stop_requested_before_the_disruption_records_nothing(tmp_path: Path) -> None:
    runner = FakeRunner()
    stop = StopControl(tmp_path / "STOP", say=lambda _m: None)

    def ask() -> str:
        stop.request("asked")
        return "skip"

    runner.hooks[2] = ask
    eng, _, _ = engine(tmp_path, runner, stop=stop)
    result = eng.run()
    assert result.reason == "asked" and result.last_cycle == 1


def test_duration_stops_before_a_cycle_that_would_not_fit(tmp_path: Path) -> None:
    now = [100.0]
    runner = FakeRunner()
    for n in range(1, 10):
        runner.hooks[n] = lambda: now.__setitem__(0, now[0] + 60)
    eng, _, _ = engine(
        tmp_path,
        runner,
        deadline_wall=1000.0 + 200,
        monotonic=lambda: now[0],
        wall=lambda: 1000.0,
    )
    result = eng.run()
    # cycles of 60 s within 200 s: 3 fit (t=160, 220, 280 after them); a 4th would end at 340
    assert result.last_cycle == 3
    assert result.reason.startswith("duration reached")


def test_resume_continues_the_count(tmp_path: Path) -> None:
    runner = FakeRunner()
    eng, _, _ = engine(tmp_path, runner, first_cycle=5, cycles=6)
    eng.run()
    assert runner.ran == [(5, "g2"), (6, "g3")]


def test_an_error_is_recorded_before_it_propagates(tmp_path: Path) -> None:
    runner = FakeRunner()

    def boom() -> None:
        raise TemporaryError("BMC of w-a2 unreachable")

    runner.hooks[2] = boom
    eng, _, _ = engine(tmp_path, runner)
    with pytest.raises(TemporaryError):
        eng.run()
    stop = read_log(tmp_path / CYCLES_FILE).last_stop
    assert stop is not None and "BMC of w-a2 unreachable" in stop["reason"]


# -- the file ------------------------------------------------------------------------------


def test_a_crash_mid_write_loses_only_that_line(tmp_path: Path) -> None:
    path = tmp_path / CYCLES_FILE
    with CycleLog(path) as log:
        log.append(record(1, GROUPS[0]).to_json())
        log.append(record(2, GROUPS[1]).to_json())
    whole = path.read_bytes()
    path.write_bytes(whole + orjson.dumps(record(3, GROUPS[2]).to_json())[:40])
    got = read_log(path)
    assert [c.cycle for c in got.cycles] == [1, 2] and got.incomplete_tail
    with CycleLog(path) as log:  # the next writer trims the partial line
        log.append(record(3, GROUPS[2]).to_json())
    assert [c.cycle for c in read_log(path).cycles] == [1, 2, 3]


def test_damage_before_the_last_line_is_reported_with_its_number(tmp_path: Path) -> None:
    path = tmp_path / CYCLES_FILE
    lines = [orjson.dumps(record(n, GROUPS[0]).to_json()) for n in (1, 2)]
    path.write_bytes(lines[0] + b"\n{oops\n" + lines[1] + b"\n")
    with pytest.raises(ConfigError, match="line 2 is damaged"):
        read_log(path)


def test_records_round_trip() -> None:
    r = record(7, GROUPS[0], "missed")
    again = CycleRecord.from_json(orjson.loads(orjson.dumps(r.to_json())))
    assert again == r


def test_phase_budgets_derive_from_the_named_budgets_and_take_overrides() -> None:
    fast = PhaseBudgets.from_budgets(PROFILES["fast"])
    assert fast.as_dict() == {
        "not_ready": 20.0,
        "evacuation": 70.0,
        "recovery": 100.0,
        "service_outage": 40.0,
        "volume_reattach": 20.0,
        "cleanup": 90.0,
    }
    assert fast.with_overrides({"recovery": "2m", "not-ready": 30}).recovery == 120.0
    with pytest.raises(ConfigError, match="unknown phase 'recover'; valid: not_ready"):
        fast.with_overrides({"recover": "1m"})


def test_a_second_sigterm_while_a_session_undoes_waits_for_the_undos(tmp_path: Path) -> None:
    from harness.journal import Terminated, install_signal_handlers, shield_signals

    stop = StopControl(tmp_path / "STOP", say=lambda _m: None)
    done: list[str] = []
    with stop.handlers():
        restore = install_signal_handlers()  # what a Session does on entry
        try:
            with stop.handlers(), pytest.raises(Terminated):
                os.kill(os.getpid(), signal.SIGTERM)  # first: stop after this cycle
                assert stop.reason == "SIGTERM received"
                with shield_signals():  # the session's undos
                    os.kill(os.getpid(), signal.SIGTERM)  # second: deferred
                    done.append("undo finished")
        finally:
            restore()
    assert done == ["undo finished"]
