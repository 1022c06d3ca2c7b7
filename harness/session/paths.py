"""Where a session keeps its state: the state directory and each inventory's journal."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from harness.inventory import Inventory
from harness.settings import Settings, or_environment


def state_dir(settings: Settings | None = None) -> Path:
    """POWERCUT_STATE_DIR (docs/settings.md), from ``settings`` or the environment now."""
    return or_environment(settings).state_dir


def journal_path_for(inventory: Inventory, settings: Settings | None = None) -> Path:
    """One journal per inventory path, so ``powercut recover --inventory X`` finds it.

    The path is made absolute but its symlinks are not followed: a Kubernetes ConfigMap or
    Secret mount reaches its files through ``..data`` links to a directory named after the
    moment each pod's kubelet wrote it, so the resolved path differs from pod to pod, and a
    runner's journal must be found by the next pod's ``recover``."""
    src = os.path.abspath(inventory.source) if inventory.source else (inventory.name or "inventory")
    digest = hashlib.sha256(src.encode()).hexdigest()[:12]
    return state_dir(settings) / "journals" / f"{inventory.name or 'inventory'}-{digest}.jsonl"
