"""Longevity: fail a fraction of the workers cyclically for hours and report statistics.

* :mod:`~harness.longevity.groups`: disjoint failure groups spread across racks.
* :mod:`~harness.longevity.engine`: the loop, stop conditions, signals.
* :mod:`~harness.longevity.cycle`: one cycle against a real cluster.
* :mod:`~harness.longevity.measure`: phase durations from a cycle's timeline (pure).
* :mod:`~harness.longevity.records`: phase budgets, cycle records, ``cycles.jsonl``.
* :mod:`~harness.longevity.stats`, :mod:`~harness.longevity.plots`,
  :mod:`~harness.longevity.report`: ``stats.json``, ``cycles.csv``, PNGs, Allure results.
* :mod:`~harness.longevity.run`: start or resume a run (what the CLI and the feature call).

See ``docs/nightly.md``.
"""
