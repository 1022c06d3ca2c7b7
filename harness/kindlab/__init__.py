"""Real-kubelet clusters with kind, built and run without a container registry.

Consumers of the library like the lab: nothing outside ``harness.lab`` / ``harness.kindlab``
imports this package.
"""
