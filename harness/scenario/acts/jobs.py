"""Re-running a Job from its manifest (a step of the etcd-rebuild repopulation runbook) and
waiting for it to complete.

The re-run is journaled by the session with its undo first (the manifest stored before the
Job is deleted: if the harness dies between the delete and the create, ``recover`` creates
it). The wait reads the Job's conditions each time the timeline grows (the Job controller's
``Completed`` / ``BackoffLimitExceeded`` events and the Job's pods wake it up); a Job that
failed ends the wait at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import allure

from harness.checks import CheckFailed
from harness.errors import PermanentError, WaitTimeout
from harness.kube.client import JSON, KubeClient, NotFound
from harness.kube.names import Act, Stage
from harness.kube.timeline import ACTION, Timeline, Transition, WaitFailed
from harness.scenario.errors import NothingToMeasure
from harness.scenario.report import Measurements
from harness.session import Session


@dataclass(frozen=True)
class Rerun:
    """What a re-run of a Job did: the old and the new Job's uid, and its actions."""

    namespace: str
    name: str
    old_uid: str
    new_uid: str
    sent: Transition  # "rerun-job sent": the delete request
    created: Transition  # "rerun-job done": the Job exists again

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


def _path(namespace: str, name: str) -> str:
    return f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}"


def _condition(job: JSON, kind: str) -> JSON | None:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind and c.get("status") == "True":
            return dict(c)
    return None


def rerun(session: Session, namespace: str, name: str, timeout_s: float) -> Rerun:
    """Delete the Job (propagation Background) and create it again from its manifest,
    within ``timeout_s``. No such Job is nothing to measure (the scenario skips)."""
    try:
        old = session.client.get(_path(namespace, name))
    except NotFound:
        raise NothingToMeasure(f"no Job {name} in namespace {namespace} to re-run") from None
    tl = session.timeline
    before = len(tl)
    with allure.step(f"re-run the Job {namespace}/{name} from its manifest"):
        new = session.rerun_job(namespace, name, timeout_s=timeout_s)
    mine = [t for t in tl.read_from(before) if t.kind == ACTION and t.name == name]
    sent = next((t for t in mine if t.transition == Act.RERUN_JOB.at(Stage.SENT)), None)
    created = next((t for t in mine if t.transition == Act.RERUN_JOB.at(Stage.DONE)), None)
    if sent is None or created is None:
        raise PermanentError(f"the re-run of Job {namespace}/{name} recorded no action")
    return Rerun(
        namespace,
        name,
        str((old.get("metadata") or {}).get("uid")),
        str((new.get("metadata") or {}).get("uid")),
        sent,
        created,
    )


def completes(
    tl: Timeline, client: KubeClient, rerun: Rerun, seconds: float, ms: Measurements
) -> None:
    """The re-created Job (by uid: not the one deleted) has its Complete condition within
    ``seconds`` of its creation; a Failed condition fails at once."""
    last: dict[str, str] = {"seen": "not read yet"}

    def job() -> JSON | None:
        obj = client.get_or_none(_path(rerun.namespace, rerun.name))
        if obj is None:
            last["seen"] = "no such Job"
            return None
        uid = str((obj.get("metadata") or {}).get("uid"))
        if uid != rerun.new_uid:
            last["seen"] = f"a Job with another uid ({uid})"
            return None
        status = obj.get("status") or {}
        last["seen"] = (
            f"active {status.get('active', 0)}, succeeded {status.get('succeeded', 0)}, "
            f"failed {status.get('failed', 0)}"
        )
        return obj

    def done() -> JSON | None:
        obj = job()
        return obj if obj is not None and _condition(obj, "Complete") is not None else None

    def failed() -> str | None:
        obj = job()
        c = _condition(obj, "Failed") if obj is not None else None
        return None if c is None else f"Job failed: {c.get('reason')}: {c.get('message')}"

    what = f"Job {rerun.ref} complete within {seconds:g}s of its re-creation"
    try:
        tl.wait_until(
            done,
            rerun.created.mono + seconds,
            what,
            last_seen=lambda: last["seen"],
            terminal=failed,
        )
    except WaitTimeout as exc:
        raise CheckFailed(what, exc.last_seen, seconds, check="job-complete") from None
    except WaitFailed as exc:
        raise CheckFailed(what, exc.seen, exc.waited_s, check="job-complete") from None
    took = tl.clock.monotonic() - rerun.created.mono
    ms.record(
        f"Job {rerun.ref} re-created",
        rerun.created.mono - rerun.sent.mono,
        None,
        started_mono=rerun.sent.mono,
    )
    ms.record(f"Job {rerun.ref} complete", took, seconds, started_mono=rerun.created.mono)
