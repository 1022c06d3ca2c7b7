"""The scenario engine: targets, disruptions, expectations and their measurements.

What the step grammar (:mod:`harness.steps`), longevity and the chaostoolkit extension share:

- :mod:`~harness.scenario.targets` and :mod:`~harness.scenario.select`: which nodes a
  scenario fails, chosen for a reason or by name, label, role, rack, count, fraction or
  range (drawn from a seed), each saying why it chose what it chose;
- :mod:`~harness.scenario.phases`: the disruptions (power, graceful shutdown, ...) and the
  expectations, each waiting within its budget for its own start event and then its end;
- :mod:`~harness.scenario.errors`: a scenario that does not apply (skip, saying what is
  missing) and an expectation placed where its start cannot come (a harness error naming
  the step it needs).
"""
