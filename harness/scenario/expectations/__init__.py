"""What the cluster must do after a disruption, each expectation measured within its budget
(see :mod:`harness.scenario`)."""
