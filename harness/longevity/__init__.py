"""Longevity: fail a fraction of the workers cyclically for hours and report statistics.

* :mod:`~harness.longevity.groups`: disjoint failure groups spread across racks.
* :mod:`~harness.longevity.engine`: the loop, stop conditions, signals.
* :mod:`~harness.longevity.cycle`: one cycle against a real cluster (its sequence and record).
* :mod:`~harness.longevity.waits`: what a cycle waits for (the outage's phases, the steady
  state); :mod:`~harness.longevity.remedy`: an operator's help when it does not settle.
* :mod:`~harness.longevity.observe`: probes, the seeded timeline, racks;
  :mod:`~harness.longevity.reads`: the workloads read from the API.
* :mod:`~harness.longevity.measure`: phase durations from a cycle's timeline (pure).
* :mod:`~harness.longevity.records`: phase budgets, cycle records, ``cycles.jsonl``.
* :mod:`~harness.longevity.stats`, :mod:`~harness.longevity.plots`,
  :mod:`~harness.longevity.report`: ``stats.json``, ``cycles.csv``, PNGs, Allure results.
* :mod:`~harness.longevity.run`: start or resume a run (what the CLI and the feature call).

See ``docs/nightly.md``.
"""
