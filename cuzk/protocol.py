"""The wire protocol's names, spelled once: every other module imports them from here.

Clients send and receive these strings (``priority`` in ``POST /v1/proofs``, the CLI's
``--priority``), so changing one is a protocol change.
"""

from __future__ import annotations

# Job priorities, most urgent first; the scheduler serves a lower rank first.
PRIORITIES: tuple[str, ...] = ("critical", "high", "normal", "low")
PRIORITY_RANK: dict[str, int] = {name: rank for rank, name in enumerate(PRIORITIES)}
DEFAULT_PRIORITY = "normal"
