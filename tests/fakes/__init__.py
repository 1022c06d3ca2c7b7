"""The test doubles, in one place (docs/DESIGN.md, "House rules"): put on top of real
parts, never instead of a peer that can run.

* :mod:`tests.fakes.api`: a Kubernetes API server over HTTP (lists, watches, 410 Gone,
  pagination) holding objects in memory; ``Changes`` waits for what an informer reports.
* :mod:`tests.fakes.power`: BMCs that answer IPMI-style power commands, with an inventory
  and kubeconfig pointing at them and at the fake API.
* :mod:`tests.fakes.docker`: a ``docker`` command on PATH that the kind driver calls.
* :mod:`tests.fakes.chaos`: a fake cluster (API, BMCs) for the chaostoolkit extension.
* :mod:`tests.fakes.relay`: a TCP relay that can cut a client off from a cluster endpoint.
* :mod:`tests.fakes.clock`: the fake clock of the unit tests (``fake_clock`` fixture); with
  ``manual=True`` it paces library threads (probers, the lab's resync, the observer) step by
  step. tests/unit/ruff.toml bans ``time.sleep`` and ``threading.Timer`` there.
"""
