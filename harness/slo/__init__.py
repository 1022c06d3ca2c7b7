"""Service-level objectives read from Prometheus: SLO and alert checks over a scenario's
window, and stop conditions that abort a scenario the moment they breach.

the inventory sections they read are :mod:`harness.inventory.slo`
``client``   the Prometheus HTTP API (instant and range queries, rules) on urllib3
``evaluate`` SLOs and alerts over a window: series, breaches, verdicts
``watch``    the stop-condition watcher (a thread) that asks the session to stop
"""
