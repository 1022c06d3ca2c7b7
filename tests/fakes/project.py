"""A user's project for the command's tests: the smallest inventory that loads (one kind
node; nothing is reached unless a scenario's step acts on it)."""

from __future__ import annotations

INVENTORY = """\
name: fake
cluster: {kubeconfig: kube.conf}
nodes:
  - {name: w1, role: worker, power: {driver: kind}}
"""
