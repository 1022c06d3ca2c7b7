"""Kubernetes access: a slim raw-JSON client, the observer, waits and actions."""
