"""The scenario engine: targets, disruptions, expectations and their measurements.

What the step grammar (:mod:`harness.steps`), longevity and the chaostoolkit extension share:

- :mod:`~harness.scenario.targets` and :mod:`~harness.scenario.select`: which nodes a
  scenario fails, chosen for a reason or by name, label, role, rack, count, fraction or
  range (drawn from a seed), each saying why it chose what it chose;
- :mod:`~harness.scenario.disrupt`: the one dispatch of every failure kind (the steps,
  longevity and the chaostoolkit extension call it); :mod:`~harness.scenario.inflict`: the
  disruptions as a step inflicts them (power, graceful shutdown, reboot, partition, kubelet
  stop, a failure held and brought back, pods restarted), each returning what the
  expectations measure from;
- :mod:`~harness.scenario.phases` (nodes and pods) and :mod:`~harness.scenario.volumes`: the
  expectations, each waiting within its budget for its own start event and then its end;
- :mod:`~harness.scenario.reads`: the raw API reads beside the timeline (pods a selector
  matches now, whether a Node exists);
- :mod:`~harness.scenario.errors`: a scenario that does not apply (skip, saying what is
  missing) and an expectation placed where its start cannot come (a harness error naming
  the step it needs).
"""
