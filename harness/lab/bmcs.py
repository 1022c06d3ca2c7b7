"""Wire the lab's nodes to their BMC endpoints (Redfish, IPMI, SSH)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.lab.supervisor import Lab


def start_bmcs(lab: Lab) -> list[Any]:
    return []
