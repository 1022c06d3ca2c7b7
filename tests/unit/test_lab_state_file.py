"""The lab supervisor's state file is written from several threads (its main loop and the
BMC threads that power nodes on and off): concurrent writes must neither fail nor leave a
torn file. A failed rename once killed the supervisor's main loop, and the BMCs with it."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from types import SimpleNamespace

from harness.lab.supervisor import Lab


def test_concurrent_state_writes_neither_fail_nor_tear(tmp_path: Path) -> None:
    lab = SimpleNamespace(
        root=tmp_path,
        cp_procs={},
        kwok={},
        haproxy=None,
        prometheus=None,
        power={f"w{i}": True for i in range(20)},
        _booting={},
        storage_cut={},
        _state_lock=threading.Lock(),
    )
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(150):
                Lab.write_state(lab, "ready", writer=n, i=i)  # type: ignore[arg-type]
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["status"] == "ready" and len(state["power"]) == 20
    assert not (tmp_path / "state.json.tmp").exists()
