"""cuzk: a persistent, GPU-resident Groth16 proving engine."""

__version__ = "0.1.0"
