"""A kubelet stop: the node keeps running and so do its containers; its kubelet stops, so
the node stops reporting and its pods are no longer managed.

Inflicted through the node's first driver that can
(:class:`~harness.power.base.SupportsKubeletStop`), which arms the kubelet's restart on the node
first (``restart_after_s``); journaled with a kubelet start as its undo; down from the stop's
acknowledgement, back at the start's. Comes back when started (or by the armed timer), never by
itself otherwise.
"""

from __future__ import annotations

from typing import Any, ClassVar

from harness.failures.running import RunningNodeFailure
from harness.journal import UndoSpec
from harness.kube.names import Act
from harness.power.base import SupportsKubeletStop


class KubeletStop(RunningNodeFailure):
    name: ClassVar[str] = "kubelet"
    verb: ClassVar[Act] = Act.KUBELET_STOP
    undo_verb: ClassVar[Act] = Act.KUBELET_START
    journaled: ClassVar[str] = "kubelet"
    undo_text: ClassVar[str] = "start kubelet"
    # what the step reference (docs/steps.md) says of it
    what: ClassVar[str] = "kubelet stopped, containers running"
    comes_back_by: ClassVar[str] = "the kubelet's start (armed on the node before the stop)"
    steps: ClassVar[str] = "`the node's kubelet is stopped for ...`, Dell-style `kubelet`"
    down_text: ClassVar[str] = (
        "the kubelet stop's acknowledgement (the service reads stopped, over SSH)"
    )
    back_text: ClassVar[str] = (
        "the kubelet start request (`the node's kubelet is started again`, or the "
        "Dell-style step's end)"
    )

    def capable(self, driver: object) -> bool:
        return isinstance(driver, SupportsKubeletStop)

    def journal_undo(self, node: str, protocol: str) -> UndoSpec:
        return UndoSpec.start_kubelet(node, protocol)

    def do(self, driver: Any, node: str, undo_after_s: float) -> None:
        assert isinstance(driver, SupportsKubeletStop)
        driver.stop_kubelet(node, restart_after_s=undo_after_s)

    def undo(self, driver: Any, node: str) -> None:
        assert isinstance(driver, SupportsKubeletStop)
        driver.start_kubelet(node)
