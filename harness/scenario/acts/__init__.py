"""What a scenario's steps do to the cluster: failures (through :mod:`harness.failures`),
the operator's actions and Job re-runs (see :mod:`harness.scenario`)."""
