"""The scenario engine: targets, acts, expectations and their measurements.

What the step grammar (:mod:`harness.steps`), longevity and the chaostoolkit extension
share, by role (the import contracts in pyproject.toml keep it so):

- ``targets/``: which nodes a scenario fails (``choice``: chosen for a reason, and what a
  disruption did to them: ``Outage``, ``PoweredOn``; ``select``: by name, label, role,
  rack, count, fraction or range, drawn from a seed; ``workloads``: the inventory's
  workloads as they are in the cluster; ``subjects``: the pod a subject phrase stands for);
- ``givens.py``: the targets as the Givens name them, each choice shown in the report;
- ``acts/``: what a step does to the cluster (``disruptions``: power, graceful shutdown,
  reboot, partition, kubelet stop, a failure held and brought back, pods restarted, each
  through the one dispatch of the failure kinds, :mod:`harness.failures`;
  ``role_failures``: the failure steps that choose first; ``operator``: the operator's
  actions; ``jobs``: a Job re-run);
- ``expectations/``: what the cluster must do after it, each waiting within its budget for
  its own start event and then its end (``phases``: nodes and pods; ``volumes``;
  ``start_events``; ``replacements``; ``statefulset_members``; ``operator_results``;
  ``availability``; ``data``; ``steady_state``; ``apiprobe``);
- ``lost_pods.py``: the timeline queries about the pods a disruption took away;
  ``reads.py``: the raw API reads beside the timeline; ``report.py``: the measurements and
  what else goes into the report; ``errors.py``: a scenario that does not apply (skip,
  saying what is missing) and an expectation placed where its start cannot come.
"""
