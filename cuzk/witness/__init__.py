"""Witness generation from circom ``.wasm`` generators, in-process with wasmtime."""

from cuzk.witness.wasm import WitnessCalculator

__all__ = ["WitnessCalculator"]
