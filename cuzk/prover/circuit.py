"""A circuit as the prover uses it: its r1cs (for checks) and its wasm witness generator."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cuzk.errors import FormatError, WitnessError
from cuzk.formats.r1cs import MATRIX_C, R1CS, R1CSConstraints, read_r1cs
from cuzk.formats.wtns import Witness
from cuzk.formats.zkey import S_COEFS, coefficients_from_r1cs, encode_coefficients
from cuzk.prover import qap

if TYPE_CHECKING:  # imported where used: a circuit proven from a .wtns needs neither
    from cuzk.prover.keys import ProvingKey
    from cuzk.witness.wasm import WitnessCalculator


BYTES_PER_CHECK_TERM = 12
"""Of one C term in ``CheckTerms``, besides its value: matrix, constraint and signal, u32 each."""


def check_terms_bytes(c_terms: int, n8: int) -> int:
    """Host bytes ``CheckTerms`` holds for ``c_terms`` terms of ``n8``-byte values: what a kind's
    key charges for them before they are built (``cuzk.formats.r1cs.count_terms``)."""
    return c_terms * (BYTES_PER_CHECK_TERM + n8)


@dataclass(frozen=True)
class CheckTerms:
    """C's terms in the form ``qap.build_abc`` takes, for the constraint check."""

    matrix: np.ndarray
    constraint: np.ndarray
    signal: np.ndarray
    value: np.ndarray

    @property
    def nbytes(self) -> int:
        return int(self.matrix.nbytes + self.constraint.nbytes + self.signal.nbytes
                   + self.value.nbytes)


class Circuit:
    """``calculator`` None: a circuit proven from ready witnesses (``.wtns``) only."""

    def __init__(self, name: str, r1cs: R1CS, calculator: WitnessCalculator | None) -> None:
        if calculator is None:
            pass
        elif calculator.n_vars != r1cs.n_wires:
            raise FormatError(
                calculator.path,
                f"computes {calculator.n_vars} signals but {r1cs.path} has {r1cs.n_wires}",
            )
        elif calculator.curve is not r1cs.curve:
            raise FormatError(
                calculator.path,
                f"is for {calculator.curve.name}, {r1cs.path} for {r1cs.curve.name}",
            )
        self.name = name
        self.r1cs = r1cs
        self.calculator = calculator
        if r1cs.constraints is not None:
            self._c_terms  # noqa: B018 - at load, not in the first job

    def constraints(self) -> R1CSConstraints:
        """The r1cs's terms, read from the file the first time they are needed when the circuit
        was loaded from its header only."""
        if self.r1cs.constraints is None:
            self.r1cs = read_r1cs(self.r1cs.path)
        assert self.r1cs.constraints is not None
        return self.r1cs.constraints

    @functools.cached_property
    def _c_terms(self) -> CheckTerms:
        """C's terms for this circuit's own checks (a circuit loaded whole, as ``cuzk prove``
        does); the server's prover builds them per key instead (``check_terms``)."""
        return self.check_terms()

    def check_terms(self) -> CheckTerms:
        """C's terms as build_abc takes them (matrix, constraint, signal, c*R^2 values): what
        ``check_satisfied`` needs of the r1cs once the key is loaded (A and B come from the
        key). Built from the constraints, which the caller may then let go (``release``)."""
        c_terms = self.constraints().of(MATRIX_C)
        return CheckTerms(
            np.zeros(len(c_terms), dtype=np.uint32),
            np.ascontiguousarray(c_terms.constraint, dtype=np.uint32),
            np.ascontiguousarray(c_terms.signal, dtype=np.uint32),
            np.ascontiguousarray(encode_coefficients(c_terms.value, self.r1cs.curve)),
        )

    def release_constraints(self) -> None:
        """Keep the r1cs's header only (its file mapped, not read): proving needs none of its
        terms once the key is checked and the check terms are built, and at 2^20 constraints
        they and the file's bytes held 474 MiB that no memory budget counted (issue 27). A
        later check reads them again (``constraints``)."""
        if self.r1cs.constraints is not None:
            self.r1cs = read_r1cs(self.r1cs.path, load_constraints=False)

    @classmethod
    def load(
        cls,
        r1cs_path: str | Path,
        wasm_path: str | Path | None,
        name: str | None = None,
        constraints: bool = True,
        witness_cache: Path | None = None,
    ) -> Circuit:
        """``constraints=False`` reads the r1cs's header only (sizes, curve): the terms are read
        when a check first needs them (``cuzk prove --wtns`` needs them only to explain a proof
        that failed its self-check). ``witness_cache``: the generator is compiled in a child
        process into that cache and mapped only while it computes (a server)."""
        r1cs = read_r1cs(r1cs_path, load_constraints=constraints)
        calculator = None
        if wasm_path is not None:
            from cuzk.witness.wasm import WitnessCalculator

            calculator = WitnessCalculator(wasm_path, cache_dir=witness_cache)
        return cls(name or Path(r1cs_path).stem, r1cs, calculator)

    @property
    def generator_bytes(self) -> int:
        """What one witness computation holds while it runs (0: no generator)."""
        return 0 if self.calculator is None else int(self.calculator.working_bytes)

    def calculate_witness(self, inputs: dict[str, Any]) -> np.ndarray:
        if self.calculator is None:
            raise WitnessError(f"circuit {self.name} has no witness generator (.wasm)")
        return self.calculator.calculate(inputs)

    def check_witness(self, witness: Witness, source: object) -> np.ndarray:
        """A witness from any generator (a ``.wtns``) against this circuit: curve and length."""
        if witness.curve is not self.r1cs.curve:
            raise FormatError(
                source,
                f"is a {witness.curve.name} witness, circuit {self.name} is {self.r1cs.curve.name}",
            )
        if len(witness) != self.r1cs.n_wires:
            raise FormatError(
                source,
                f"has {len(witness)} signals, circuit {self.name} ({self.r1cs.path}) "
                f"has {self.r1cs.n_wires}: a witness of another circuit",
            )
        return np.ascontiguousarray(witness.values, dtype=np.uint32)

    def check_key(self, key: ProvingKey) -> None:
        """Refuse a zkey made for another circuit, or whose constraint coefficients were
        corrupted, before it produces a proof that cannot verify (or blames the witness)."""
        self.check_key_sizes(key)
        self.check_key_coefficients(key)

    def check_key_coefficients(self, key: ProvingKey) -> None:
        """Section 4 must be exactly what a Groth16 setup derives from this r1cs (snarkjs and
        ``cuzk keygen`` write the same bytes), so a difference is the key's fault."""
        self.constraints()
        expected = coefficients_from_r1cs(self.r1cs)
        got = key.zkey.coeffs
        where = f"section {S_COEFS} (coefficients)"
        if len(got) != len(expected):
            raise FormatError(
                key.path,
                f"{where}: {len(got)} coefficients, but circuit {self.name} "
                f"({self.r1cs.path}) needs {len(expected)}: the key is for another circuit",
            )
        raw_got = np.ascontiguousarray(got).view(np.uint8).reshape(len(got), -1)
        raw_exp = expected.view(np.uint8).reshape(len(expected), -1)
        bad = np.flatnonzero((raw_got != raw_exp).any(axis=1))
        if bad.size:
            i = int(bad[0])
            e = expected[i]
            matrix = "AB"[int(e["matrix"])] if int(e["matrix"]) < 2 else str(int(e["matrix"]))
            error = FormatError(
                key.path,
                f"{where}: {bad.size} of {len(expected)} entries disagree with "
                f"{self.r1cs.path}, the first is entry {i} (matrix {matrix}, constraint "
                f"{int(e['constraint'])}, signal {int(e['signal'])}): the key is corrupt or "
                "was made for another circuit",
            )
            error.section = S_COEFS
            raise error

    def check_key_sizes(self, key: ProvingKey) -> None:
        """Curve, signal counts and domain of the key against the circuit's r1cs."""
        r, s = self.r1cs, key.sizes
        problems = []
        if key.curve is not r.curve:
            problems.append(f"curve {key.curve.name} != {r.curve.name}")
        if s.n_vars != r.n_wires:
            problems.append(f"{s.n_vars} signals, circuit has {r.n_wires}")
        if s.n_public != r.n_public:
            problems.append(f"{s.n_public} public signals, circuit has {r.n_public}")
        if s.domain_size != r.domain_size:
            problems.append(f"domain {s.domain_size}, circuit needs {r.domain_size}")
        if problems:
            raise FormatError(
                key.path, f"is not a key for circuit {self.name}: " + "; ".join(problems)
            )

    def check_satisfied(
        self, witness: np.ndarray, c_evals: np.ndarray, terms: CheckTerms | None = None
    ) -> None:
        """Every constraint a*b = c holds; else name the first one that does not.

        ``c_evals`` is synthesize's a*b (Montgomery); C*w is computed from the r1cs's C terms
        (``terms``, built with the key; else this circuit's own).
        """
        n = self.r1cs.n_constraints
        domain = c_evals.shape[0]
        terms = self._c_terms if terms is None else terms
        cw, _, _ = qap.build_abc(terms.matrix, terms.constraint, terms.signal, terms.value,
                                 witness, domain)
        bad = np.flatnonzero((cw[:n] != c_evals[:n]).any(axis=1))
        if bad.size:
            raise WitnessError(
                f"witness of {self.name} does not satisfy constraint {int(bad[0])} "
                f"({bad.size} of {n} constraints fail): {self._unsatisfied_cause()}"
            )

    _CHECK_ADVICE = " (check them with `cuzk circuit check --input`)"

    def check_satisfies(self, witness: np.ndarray) -> None:
        """``check_satisfied`` from the r1cs alone, no key: a*b from its A and B terms, laid
        out as a setup lays them in a key's section 4. It is what `cuzk circuit check --input`
        runs, so its error does not advise running that."""
        self.constraints()
        coeffs = coefficients_from_r1cs(self.r1cs)
        matrix, constraint, signal, value = (
            np.ascontiguousarray(coeffs[f], dtype=np.uint32)
            for f in ("matrix", "constraint", "signal", "value")
        )
        _, _, ab = qap.build_abc(matrix, constraint, signal, value, witness,
                                 self.r1cs.domain_size)
        try:
            self.check_satisfied(witness, ab)
        except WitnessError as e:
            raise WitnessError(str(e).removesuffix(self._CHECK_ADVICE)) from None

    def _unsatisfied_cause(self) -> str:
        """The likely cause of a witness that breaks a constraint. A circom witness generator
        checks its own constraints as it computes, so a witness this circuit's wasm made that
        breaks the r1cs's means the two are of different circuits (one recompiled, or another
        circuit of the same shape); a circuit without a wasm was given a ready witness."""
        wasm = getattr(self.calculator, "path", None)
        if wasm is not None:
            return (f"the wasm {wasm} and the r1cs {self.r1cs.path} may not be of the same"
                    f" circuit{self._CHECK_ADVICE}")
        return (f"the witness may be of another circuit than {self.r1cs.path}, or its generator"
                " and that r1cs may not match")
