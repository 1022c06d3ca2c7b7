"""Which nodes a scenario disrupts: the choice, the selection words, the workloads and the
subject phrases (see :mod:`harness.scenario`)."""
