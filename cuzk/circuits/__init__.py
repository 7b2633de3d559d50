"""The bundled proof-kind circuits (structural stand-ins; see README.md here)."""

from cuzk.circuits.registry import BundledCircuit, CircuitParams, bundled_circuits

__all__ = ["BundledCircuit", "CircuitParams", "bundled_circuits"]
