"""The bundled sample inputs that the benches driving a real ``cuzk serve`` submit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def sample_inputs(kind: str) -> dict[str, Any]:
    """The bundled sample input of a proof kind (one partition's signals)."""
    from cuzk.circuits.registry import bundled_circuits

    return json.loads(Path(bundled_circuits()[kind].sample_input_path).read_text())
