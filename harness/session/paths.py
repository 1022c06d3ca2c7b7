"""Where a session keeps its state: the state directory and each inventory's journal."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from harness.inventory import Inventory


def state_dir() -> Path:
    return Path(os.environ.get("POWERCUT_STATE_DIR", Path.home() / ".local" / "state" / "powercut"))


def journal_path_for(inventory: Inventory) -> Path:
    """One journal per inventory path, so ``powercut recover --inventory X`` finds it.

    The path is made absolute but its symlinks are not followed: a Kubernetes ConfigMap or
    Secret mount reaches its files through ``..data`` links to a directory named after the
    moment each pod's kubelet wrote it, so the resolved path differs from pod to pod, and a
    runner's journal must be found by the next pod's ``recover``."""
    src = os.path.abspath(inventory.source) if inventory.source else (inventory.name or "inventory")
    digest = hashlib.sha256(src.encode()).hexdigest()[:12]
    return state_dir() / "journals" / f"{inventory.name or 'inventory'}-{digest}.jsonl"
