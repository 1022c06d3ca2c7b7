"""The embedded lab: a real control plane with kwok nodes and BMCs on loopback.

Nothing outside ``harness.lab`` (and the CLI) imports this package: the lab is a target
like any other.
"""
