"""A synchronized cut with bounded threads: prepare in a pool, send from a few threads
released together, stamp every answer from one selector.

A rack's PDU failing cuts every node at once. ``Session.power_off`` used to give each node
a thread that prepared its request, waited at a barrier and then sent it: at 48 nodes the
48 threads woken together queued for the GIL, each building its request through sushy and
requests (about 1 ms of CPU each), so the requests left 44-60 ms apart and the answers were
stamped later still. A :class:`Volley` instead:

1. prepares every node (connection, authentication, discovery, session, current state) on
   a pool of at most ``workers`` threads; if one node cannot be prepared, nothing is sent;
2. sends every request from a few threads (``SENDERS``), back to back: a request that
   can be split
   (:class:`SplitPower`: its bytes built at the prepare, written on a connection opened
   then) costs one write; one that cannot (SSH, plugins) is fired whole on the pool;
3. stamps each answer from one thread with a selector as soon as it has arrived whole (an
   HTTP status line and headers, ``ipmitool``'s prompt after its answer);
4. checks each answer (the HTTP status, the IPMI completion code) and reads the new state
   back on the pool. An answer that is not an acceptance, or none at all, is retried by
   the driver's own whole request, with its retries and error messages; its
   acknowledgement is then when that returned.
"""

from __future__ import annotations

import selectors
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from harness.errors import PermanentError, not_acted
from harness.power.base import PreparedPower

#: Threads that prepare, check answers and read states back, whatever the node count: a
#: prepare is mostly waiting for a BMC, and 16 keep a 96-node cut's prepare under a second
#: on a lab without one thread per node.
WORKERS = 16
#: Threads that write the requests, each a share, released together (see Volley._send).
SENDERS = 4
#: Longest wait for an answer before the driver's own request takes over.
ANSWER_TIMEOUT_S = 10.0


@runtime_checkable
class SplitPower(Protocol):
    """A prepared request whose sending and answer are separate steps."""

    def send(self) -> None:
        """Write the request (built at the prepare) on the connection opened then."""
        ...

    def answer_fd(self) -> int:
        """The file descriptor the answer arrives on (asked once every request is sent)."""
        ...

    def feed(self) -> bool:
        """Read what has arrived without blocking; True once the whole answer is in."""
        ...

    def accepted(self) -> bool:
        """Whether the answer read is an acceptance; False: the driver's whole request
        (:meth:`PreparedPower.fire`) must be sent instead (it retries, or raises the
        driver's error)."""
        ...


@dataclass
class Shot:
    """One node's part of a volley (monotonic seconds)."""

    node: str
    prepared: PreparedPower | None = None
    sent: float | None = None
    acknowledged: float | None = None
    confirmed: float | None = None
    error: BaseException | None = None
    retried: bool = False  # the split answer was not an acceptance: the whole request ran


@dataclass
class Volley:
    """Prepare, release together, stamp, confirm: see the module's docstring."""

    workers: int = WORKERS
    senders: int = SENDERS
    answer_timeout_s: float = ANSWER_TIMEOUT_S
    #: Called on the pool for each node just before its preparation (the journal's entry).
    before: Callable[[str], None] = lambda _node: None
    shots: dict[str, Shot] = field(default_factory=dict)

    def run(self, nodes: Iterable[str], prepare: Callable[[str], PreparedPower]) -> dict[str, Shot]:
        names = list(nodes)
        self.shots = {n: Shot(n) for n in names}
        with ThreadPoolExecutor(
            max_workers=max(1, min(self.workers, len(names))), thread_name_prefix="volley"
        ) as pool:
            if not self._prepare(pool, names, prepare):
                return self.shots
            self._release(pool)
            self._confirm(pool)
        return self.shots

    def _prepare(
        self, pool: ThreadPoolExecutor, names: list[str], prepare: Callable[[str], PreparedPower]
    ) -> bool:
        failed = threading.Event()

        def one(node: str) -> None:
            shot = self.shots[node]
            if failed.is_set():
                shot.error = _not_sent(node)
                return
            try:
                self.before(node)
                shot.prepared = prepare(node)
            except BaseException as exc:  # noqa: BLE001 (kept as this node's error)
                failed.set()
                shot.error = exc

        wait([pool.submit(one, n) for n in names])
        if not failed.is_set():
            return True
        for shot in self.shots.values():
            close = getattr(shot.prepared, "close", None)
            if close is not None:
                close()  # a connection opened for a request that is not sent
            if shot.error is None:
                shot.error = _not_sent(shot.node)
        return False

    def _release(self, pool: ThreadPoolExecutor) -> None:
        shots = list(self.shots.values())
        split = [s for s in shots if isinstance(s.prepared, SplitPower)]
        whole = [s for s in shots if not isinstance(s.prepared, SplitPower)]
        futures: list[Future[None]] = []
        sel = selectors.DefaultSelector()
        try:
            failed: list[Shot] = []
            self._send(split, failed)
            futures.extend(pool.submit(self._whole, s, retried=True) for s in failed)
            written = [s for s in split if s not in failed]
            for s in written:  # on a busy machine a short loop above loses the CPU less
                assert isinstance(s.prepared, SplitPower)
                sel.register(s.prepared.answer_fd(), selectors.EVENT_READ, s)
            futures.extend(pool.submit(self._whole, s) for s in whole)
            deadline = time.monotonic() + self.answer_timeout_s
            while sel.get_map() and (left := deadline - time.monotonic()) > 0:
                for key, _ in sel.select(left):
                    arrived = time.monotonic()
                    shot: Shot = key.data
                    assert isinstance(shot.prepared, SplitPower)
                    try:
                        complete = shot.prepared.feed()
                    except OSError:
                        complete = True  # the connection broke: accepted() says no
                    if complete:
                        sel.unregister(key.fileobj)
                        shot.acknowledged = arrived
                        futures.append(pool.submit(self._check, shot))
            for key in list(sel.get_map().values()):  # no whole answer in time
                futures.append(pool.submit(self._whole, key.data, retried=True))
        finally:
            sel.close()
        wait(futures)

    def _send(self, split: list[Shot], failed: list[Shot]) -> None:
        """Write every split request, back to back, from ``senders`` threads released
        together: a write to a pipe or socket wakes its reader (``ipmitool``, the BMC
        emulator), and on a busy machine the kernel may run the woken reader first; one
        sender then waited once per request (48 IPMI requests left 119 ms apart at load
        45), several go on while one waits."""
        groups = [split[i :: self.senders] for i in range(min(self.senders, len(split)))]
        go = threading.Event()

        def write(group: list[Shot]) -> None:
            go.wait()
            for s in group:  # nothing between two writes but a stamp
                assert isinstance(s.prepared, SplitPower)
                s.sent = time.monotonic()
                try:
                    s.prepared.send()
                except OSError:
                    failed.append(s)

        threads = [threading.Thread(target=write, args=(g,), name="volley-send") for g in groups]
        for t in threads:
            t.start()
        go.set()
        for t in threads:
            t.join()

    def _check(self, shot: Shot) -> None:
        assert isinstance(shot.prepared, SplitPower)
        if not shot.prepared.accepted():
            self._whole(shot, retried=True)

    @staticmethod
    def _whole(shot: Shot, *, retried: bool = False) -> None:
        assert shot.prepared is not None
        shot.retried = retried
        if shot.sent is None:
            shot.sent = time.monotonic()
        try:
            shot.prepared.fire()
            shot.acknowledged = time.monotonic()
        except BaseException as exc:  # noqa: BLE001 (kept as this node's error)
            shot.acknowledged = None
            shot.error = exc

    def _confirm(self, pool: ThreadPoolExecutor) -> None:
        def one(shot: Shot) -> None:
            assert shot.prepared is not None
            try:
                shot.prepared.confirm()
                shot.confirmed = time.monotonic()
            except BaseException as exc:  # noqa: BLE001 (kept as this node's error)
                shot.error = exc

        wait([pool.submit(one, s) for s in self.shots.values() if s.error is None])


def _not_sent(node: str) -> BaseException:
    return not_acted(
        PermanentError(
            f"{node}: power-off not sent: another node of the same cut could not be prepared"
        )
    )
