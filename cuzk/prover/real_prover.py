"""ProverBackend over ``cuzk.prover``; imported lazily so the engine loads without it.

Written against cuzk.prover as it stands: ProvingKey.load(path) (.host_bytes, .sizes with
n_vars/n_public/domain_size/n_coefficients); Circuit.load(r1cs, wasm, name);
estimate_memory(sizes, gpu_on_host) whose ``reservation_bytes`` is what a partition holds
(``abc_bytes`` of it freed after the GPU phase); synthesize(key, circuit, inputs);
gpu_phase(key, s, backend); finalize(key, s, g, verify_proof=True) -> Proof(proof, public);
s.release_abc(); CpuBackend() / CudaBackend(i) with upload_key, drop_key, working_bytes,
key_device_bytes, memory_info and lane(); keystore.ensure_zkey for kinds that name no zkey.

Workers on one CUDA device: the device's CudaBackend holds the resident keys; each GPU worker
gets a lane of it (own streams, pinned staging, executor) from the device's pool of
``gpu_workers_per_device`` + ``reserved_gpu_workers_per_device`` lanes, so their GPU
phases overlap on the device.

Keys go host first, device second: ``load_key`` reads and checks the key and says how many
device bytes it will take (``KeyHandle.device_bytes``, without uploading); the engine reserves
them and only then calls ``upload_key``.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cuzk.engine.backend import (
    InProcessDevices,
    KeyHandle,
    PartitionMemory,
    PhasePrior,
    ProofResult,
)
from cuzk.engine.settings import EngineSettings, ProofKindSettings
from cuzk.engine.witnesses import WitnessRef, WitnessShape
from cuzk.errors import UnknownProofKind

if TYPE_CHECKING:
    from cuzk.prover.backend import ComputeBackend
    from cuzk.prover.key_layout import KeyLayout

log = logging.getLogger(__name__)

WITNESS_RUNTIME_BYTES = 20 << 20
"""What the process holds for wasmtime once its first witness generator has run, whatever
the kinds and however many: the library's pages and the engine (measured with the bundled
kinds: 12.3-12.4 MiB on a quiet machine, 16.0 MiB in one clean-clone CI run under load, 7.1
of them file-backed; ``tests/cuzk/prover/test_prover_generator_resident.py`` checks it). A
generator itself holds nothing between computations (``cuzk.witness.compiled``)."""

WITNESS_CACHE = "witness"
"""Under ``keys_dir``: the compiled witness generators (``cuzk.witness.compiled``)."""


def cuda_device_count() -> int:
    """Usable CUDA devices (0 when CUDA or its Python bindings are missing)."""
    from cuzk.prover.backend import cupy_installed

    if not cupy_installed():  # answered without importing the CUDA backend and numba
        return 0
    try:
        from cuzk.prover.cuda_backend import cuda_device_count as count

        return int(count())
    except Exception:
        return 0


class _Key:
    """What the engine's KeyHandle.key holds for the real prover: the key, its circuit (the
    witness generator and the r1cs header) and C's terms for the constraint check, which
    the handle's host bytes count and which go with it."""

    def __init__(self, key: Any, circuit: Any, terms: Any) -> None:
        self.key = key
        self.circuit = circuit
        self.terms = terms


class LanePool:
    """The lanes of one device, one per GPU worker. A GPU phase takes a free lane for its
    duration; with as many lanes as workers no phase ever waits for one, and no two phases in
    flight share streams or staging. The most recently returned lane goes out first."""

    def __init__(self, lanes: Sequence[Any]) -> None:
        self.lanes = list(lanes)
        self._free: queue.LifoQueue[Any] = queue.LifoQueue()
        for lane in self.lanes:
            self._free.put(lane)

    @contextmanager
    def use(self) -> Iterator[Any]:
        lane = self._free.get()
        try:
            yield lane
        finally:
            self._free.put(lane)


class RealProver(InProcessDevices):
    def __init__(self, settings: EngineSettings) -> None:
        self.settings = settings
        backend = settings.backend
        count = cuda_device_count() if backend in ("auto", "cuda") else 0
        if backend == "cuda" and count == 0:
            from cuzk.prover.backend import no_cuda

            raise no_cuda("backend = \"cuda\" (engine.backend, CUZK_ENGINE_BACKEND)",
                          'backend = "auto" or "cpu"')
        self._backends: dict[str, ComputeBackend] = {}
        self._lanes: dict[str, LanePool] = {}
        from cuzk.prover.cpu_backend import CpuBackend

        if count:
            from cuzk.prover.cuda_backend import CudaBackend

            indices = settings.cuda_devices if settings.cuda_devices is not None else range(count)
            for i in indices:
                device = CudaBackend(i, msm_precompute=settings.msm_precompute)
                device.warmup()  # compile every kernel now, not inside the first job's GPU phase
                self._backends[f"cuda:{i}"] = device
                self._lanes[f"cuda:{i}"] = LanePool(
                    [device.lane() for _ in range(settings.gpu_workers_per_device
                                                  + settings.reserved_gpu_workers_per_device)])
            self.name = "cuda"
        else:
            self._backends["cpu"] = CpuBackend()
            self.name = "cpu"
        # Synthesis runs CPU kernels on every backend: compiled now, not in the first job.
        CpuBackend.warm_up()
        from cuzk.prover import native_msm

        native_msm.configure(settings.field_arith)
        self.field_arith = native_msm.arith_path()
        self.remote_step_spans = False  # steps run in this process: the engine records them
        self.synthesis_waits_for_worker = False  # the engine's own thread synthesizes
        self.devices = list(self._backends)
        self._zkeys: dict[str, Path] = {}
        self._circuits: dict[str, Any] = {}
        self._circuits_lock = threading.Lock()
        self._vks: dict[str, tuple[tuple[str, int, int], dict[str, Any]]] = {}
        self._layouts: dict[str, tuple[tuple[str, int, int], KeyLayout]] = {}
        self._parsed_vks: dict[str, tuple[tuple[str, int, int], Any]] = {}
        self._input_elements: dict[str, int] = {}
        self._check_bytes: dict[str, tuple[tuple[str, int, int], int]] = {}
        from cuzk.prover.priors import Calibration

        self._calibration = Calibration()

    def lanes_per_device(self) -> dict[str, int]:
        """Lanes (one per GPU worker) on each CUDA device; empty on the CPU backend."""
        return {device: len(pool.lanes) for device, pool in self._lanes.items()}

    def device_memory_bytes(self, device: str) -> int | None:
        from cuzk.prover.backend import DeviceMemory

        backend = self._backends.get(device)
        if not isinstance(backend, DeviceMemory):
            return None
        _free, total = backend.memory_info()
        return total

    def device_pci_bus_id(self, device: str) -> str | None:
        """The PCI bus id CUDA reports for ``device`` (how telemetry finds it in NVML)."""
        from cuzk.prover.backend import DeviceMemory

        backend = self._backends.get(device)
        if not isinstance(backend, DeviceMemory):
            return None
        index = backend.device_index
        try:
            import cupy

            return str(cupy.cuda.Device(index).pci_bus_id)
        except Exception:
            return None

    def _kind(self, proof_kind: str) -> ProofKindSettings:
        kind = self.settings.proof_kinds.get(proof_kind)
        if kind is None:
            raise UnknownProofKind(f"unknown proof kind {proof_kind!r}")
        return kind

    def _circuit_paths(self, proof_kind: str) -> tuple[Path, Path]:
        kind = self._kind(proof_kind)
        if kind.r1cs is not None and kind.wasm is not None:
            return Path(kind.r1cs), Path(kind.wasm)
        from cuzk.circuits.registry import bundled_circuits

        bundled = bundled_circuits()[proof_kind]
        return Path(kind.r1cs or bundled.r1cs_path), Path(kind.wasm or bundled.wasm_path)

    def zkey_path(self, proof_kind: str) -> Path:
        """The configured zkey, or the cached development key (generated once if absent)."""
        if proof_kind in self._zkeys:
            return self._zkeys[proof_kind]
        kind = self._kind(proof_kind)
        if kind.zkey is not None:
            path = Path(kind.zkey)
        else:
            from cuzk.prover.keystore import ensure_zkey

            r1cs, _ = self._circuit_paths(proof_kind)
            path = ensure_zkey(proof_kind, r1cs, self.settings.keys_dir)
        self._zkeys[proof_kind] = path
        return path

    def circuit(self, proof_kind: str) -> Any:
        """The circuit of a proof kind, loaded once and kept: its witness generator (inputs
        are checked with it at submit) and its r1cs's header. Its terms are read only while a
        key is loaded and checked (``load_key``), never kept here. The generator is compiled
        in a child process into ``keys_dir/witness`` and mapped only while it computes
        (``cuzk.witness.compiled``): between computations it holds nothing but its figures."""
        with self._circuits_lock:
            if proof_kind not in self._circuits:
                from cuzk.prover import Circuit

                r1cs, wasm = self._circuit_paths(proof_kind)
                self._circuits[proof_kind] = Circuit.load(
                    r1cs, wasm, name=proof_kind, constraints=False,
                    witness_cache=self.settings.keys_dir / WITNESS_CACHE)
            return self._circuits[proof_kind]

    def check_terms_bytes(self, proof_kind: str) -> int:
        """Host bytes of C's terms that a loaded key of the kind holds for the constraint
        check, from the r1cs's constraint headers (cached until the file changes)."""
        from cuzk.formats.r1cs import count_terms, read_r1cs
        from cuzk.prover.circuit import check_terms_bytes

        path = self._circuit_paths(proof_kind)[0]
        st = path.stat()
        stamp = (str(path), st.st_mtime_ns, st.st_size)
        cached = self._check_bytes.get(proof_kind)
        if cached is None or cached[0] != stamp:
            n8 = read_r1cs(path, load_constraints=False).n8
            cached = (stamp, check_terms_bytes(count_terms(path)[2], n8))
            self._check_bytes[proof_kind] = cached
        return cached[1]

    def runtime_host_bytes(self) -> int:
        """The wasm runtime every witness generator runs in, once per process
        (``WITNESS_RUNTIME_BYTES``)."""
        return WITNESS_RUNTIME_BYTES

    def check_inputs(self, proof_kind: str, inputs: Sequence[Mapping[str, Any]]) -> None:
        """Run the witness generator on each distinct input: a WitnessError names the partition."""
        from cuzk.errors import WitnessError

        circuit = self.circuit(proof_kind)
        seen: set[str] = set()
        for i, item in enumerate(inputs):
            digest = json.dumps(item, sort_keys=True, default=str)
            if digest in seen:
                continue
            seen.add(digest)
            try:
                circuit.calculate_witness(dict(item))
            except WitnessError as e:
                raise WitnessError(f"inputs[{i}]: {e}") from None

    def _zkey_if_ready(self, proof_kind: str) -> Path | None:
        """The zkey if it exists now: hints never generate a development key (that can take a
        minute, and hints are asked for at submit)."""
        if proof_kind in self._zkeys:
            return self._zkeys[proof_kind]
        kind = self._kind(proof_kind)
        if kind.zkey is not None:
            return Path(kind.zkey)
        from cuzk.prover.keystore import cached_zkey_path

        r1cs, _ = self._circuit_paths(proof_kind)
        path = cached_zkey_path(proof_kind, r1cs, self.settings.keys_dir)
        return path if path.exists() else None

    def key_layout(self, proof_kind: str) -> KeyLayout:
        """The kind's key layout (``cuzk.prover.key_layout``) without loading or generating the
        key: from the zkey's sections when it exists, else from the r1cs the development key
        will be made from. Cached until the file it was read from changes."""
        from cuzk.prover.key_layout import KeyLayout

        zkey = self._zkey_if_ready(proof_kind)
        source = zkey if zkey is not None else self._circuit_paths(proof_kind)[0]
        st = source.stat()
        stamp = (str(source), st.st_mtime_ns, st.st_size)
        cached = self._layouts.get(proof_kind)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        if zkey is not None:
            from cuzk.formats.zkey import read_zkey

            layout = KeyLayout.of_zkey(read_zkey(zkey, mmap=True))
        else:
            from cuzk.formats.r1cs import read_r1cs

            layout = KeyLayout.of_r1cs(read_r1cs(source))
        self._layouts[proof_kind] = (stamp, layout)
        return layout

    def input_elements(self, proof_kind: str) -> int:
        """Field elements one partition's inputs hold (the r1cs header's public and private
        input counts, arrays flattened): what bounds a submit's body before it is parsed."""
        cached = self._input_elements.get(proof_kind)
        if cached is None:
            from cuzk.formats.r1cs import read_r1cs

            r1cs = read_r1cs(self._circuit_paths(proof_kind)[0], load_constraints=False)
            cached = self._input_elements[proof_kind] = int(r1cs.n_pub_in + r1cs.n_prv_in)
        return cached

    def key_bytes_hint(self, proof_kind: str) -> int:
        """The host bytes the loaded key will hold: the exact figure the budget charges once it
        is loaded (one function, ``KeyLayout.host_bytes_for``, plus the check's C terms,
        ``check_terms_bytes``), known before any key exists."""
        from cuzk.prover import native_msm

        layout = self.key_layout(proof_kind)
        return int(layout.host_bytes_for(native=native_msm.available(),
                                         tables=self.msm_tables(layout))
                   ) + self.check_terms_bytes(proof_kind)

    def msm_tables(self, layout: KeyLayout) -> bool:
        """Whether a key of this layout gets window tables (``[prover] msm_precompute``; auto
        decides from the host memory budget), the same answer before and at load."""
        from cuzk.prover import native_msm

        s = self.settings
        if self.name != "cpu" or s.msm_precompute == "off":
            return False  # the GPU runs the MSMs: the tables would go unused
        return native_msm.tables_wanted(s.msm_precompute, layout.table_bytes,
                                        s.host_budget_bytes())

    def verification_key(self, proof_kind: str) -> dict[str, Any]:
        """The snarkjs verification key (with vk_alphabeta_12) of the zkey this kind is proven
        with, cached until the file changes."""
        from cuzk.prover.keys import read_verification_key

        path = self.zkey_path(proof_kind)
        st = path.stat()
        stamp = (str(path), st.st_mtime_ns, st.st_size)
        cached = self._vks.get(proof_kind)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        vk = read_verification_key(path).to_json()  # FormatError names file and section
        self._vks[proof_kind] = (stamp, vk)
        return vk


    def verify_proof(
        self, proof_kind: str, proof: Mapping[str, Any], public: Sequence[str]
    ) -> bool | None:
        """Groth16 verification of a proof with this kind's verification key (the engine checks
        journaled proofs with it before serving them); a malformed proof is False."""
        from cuzk.prover.keys import read_verification_key
        from cuzk.prover.verify import verify

        path = self.zkey_path(proof_kind)
        st = path.stat()
        stamp = (str(path), st.st_mtime_ns, st.st_size)
        cached = self._parsed_vks.get(proof_kind)
        if cached is None or cached[0] != stamp:
            cached = (stamp, read_verification_key(path))
            self._parsed_vks[proof_kind] = cached
        try:
            return verify(cached[1], dict(proof), list(public))
        except ValueError:
            return False

    def key_device_bytes_hint(self, proof_kind: str) -> int:
        """Device bytes the kind's key will take on each device once uploaded, from the zkey's
        header and point sections (read memory-mapped): the engine reserves them before the
        first load, so the upload never runs ahead of its reservation. 0 on the CPU backend
        or while the key does not exist yet."""
        if self.name == "cpu":
            return 0
        from cuzk.formats.zkey import read_zkey
        from cuzk.prover.backend import DeviceMemory
        from cuzk.prover.cuda_backend import SECTIONS, key_device_bytes, present_rows

        path = self._zkey_if_ready(proof_kind)
        if path is None:
            return 0
        zk = read_zkey(path, mmap=True)
        arrays = dict(zip(SECTIONS, (zk.a, zk.b1, zk.c, zk.h, zk.b2), strict=True))
        rows = {s: int(a.shape[0]) for s, a in arrays.items()}
        kept = {s: present_rows(a) for s, a in arrays.items()}
        # each device's MSM window copies ([prover] msm_precompute), as its upload makes them
        budgets = {getattr(b, "msm_table_budget", 0) for b in self._backends.values()
                   if isinstance(b, DeviceMemory)} or {0}
        return max(key_device_bytes(zk.domain_size, rows, kept, budget) for budget in budgets)

    def phase_prior(self, proof_kind: str) -> PhasePrior | None:
        """The kind's phases from its key's layout (no key built or generated) at the rates a
        one-off calibration measured on this machine (``cuzk.prover.priors``). On a CUDA
        device, whose kernels the calibration does not time, the device phase is priced at
        the host's CPU rates: an upper bound (the device is the faster), so the first job of a
        kind is predicted, never admitted blind (it may be refused for a deadline only the
        device's speed would meet); its first measurement replaces it."""
        from cuzk.prover.priors import phase_seconds

        sizes = self.key_layout(proof_kind).sizes
        rates = self._calibration.rates()
        on_device = self.name != "cpu"
        device = (": the device phase at those CPU rates, an upper bound until measured on "
                  f"{self.name}" if on_device else "")
        return PhasePrior(
            phase_seconds(sizes, rates),
            f"domain 2^{sizes.log_domain}, {sizes.n_coefficients} coefficients at the CPU "
            f"kernel rates calibrated at start ({rates.threads} threads, witness generation "
            f"not included){device}")

    def partition_memory_hint(self, proof_kind: str) -> PartitionMemory | None:
        """What a partition will reserve, from the key's layout (no key built or generated):
        the engine checks a kind fits its budget before anything is loaded. The same figure
        load_key reports, on the host side."""
        from cuzk.prover import estimate_memory

        sizes = self.key_layout(proof_kind).sizes
        est = estimate_memory(sizes, gpu_on_host=self.name == "cpu",
                              generator_bytes=self.circuit(proof_kind).generator_bytes)
        return PartitionMemory(int(est.reservation_bytes), int(est.abc_bytes), 0)

    def load_key(self, proof_kind: str) -> KeyHandle:
        """Load the kind's zkey and check it against the circuit (curve, sizes, every point,
        the coefficients): a broken key is a FormatError naming the file and section. Host
        only: ``device_bytes`` is what :meth:`upload_key` will take per device, computed."""
        from cuzk.prover import ProvingKey, estimate_memory
        from cuzk.prover.backend import DeviceMemory

        circuit = self.circuit(proof_kind)
        path = self.zkey_path(proof_kind)
        key = ProvingKey.load(path, tables=self.msm_tables(self.key_layout(proof_kind)))
        try:
            circuit.check_key(key)  # reads the r1cs's terms
            terms = circuit.check_terms()
        finally:
            circuit.release_constraints()  # A and B are in the key, C in ``terms``
            from cuzk.prover.host_pages import drop_mapped_pages

            drop_mapped_pages(key.zkey.a)  # what proving reads faults back in, counted
        device_bytes = working = 0
        for backend in self._backends.values():
            if isinstance(backend, DeviceMemory):
                device_bytes = max(device_bytes, int(backend.key_device_bytes(key)))
                working = max(working, int(backend.working_bytes(key)))
        est = estimate_memory(key.sizes, gpu_on_host=self.name == "cpu",
                              generator_bytes=circuit.generator_bytes)
        sizes = key.sizes
        return KeyHandle(
            proof_kind=proof_kind,
            key=_Key(key, circuit, terms),
            host_bytes=int(key.host_bytes) + terms.nbytes,
            device_bytes=device_bytes,
            msm_table_bytes=int(key.table_bytes),
            estimate=PartitionMemory(
                partition_bytes=int(est.reservation_bytes),
                abc_bytes=int(est.abc_bytes),
                device_bytes=working,  # the host side of the GPU phase is in the reservation
            ),
            sizes={
                "vars": int(sizes.n_vars),
                "public": int(sizes.n_public),
                "domain_size": int(sizes.domain_size),
                "coefficients": int(sizes.n_coefficients),
            },
        )

    def upload_key(self, handle: KeyHandle) -> None:
        """Make a loaded key resident on every device (called once its device bytes are
        reserved). On failure nothing stays uploaded and the error goes to the caller."""
        key = handle.key.key
        done = []
        try:
            for backend in self._backends.values():
                backend.upload_key(key)
                done.append(backend)
        except BaseException:
            for backend in done:
                try:
                    backend.drop_key(key)
                except Exception:
                    log.exception("dropping a half-uploaded key from %s failed", backend)
            raise

    def unload_key(self, handle: KeyHandle) -> None:
        for backend in self._backends.values():
            try:
                backend.drop_key(handle.key.key)
            except Exception:  # dropping is best effort; the memory goes with the object
                log.exception("dropping key %s from %s failed", handle.proof_kind, backend)

    def synthesize(self, key: KeyHandle, inputs: Mapping[str, Any] | WitnessRef) -> Any:
        from cuzk.prover import synthesize

        if isinstance(inputs, WitnessRef):
            return self._synthesize_witness(key, inputs)
        return synthesize(key.key.key, key.key.circuit, dict(inputs), terms=key.key.terms)

    def _synthesize_witness(self, key: KeyHandle, ref: WitnessRef) -> Any:
        """A witness submitted ready-made (checked at submit): a/b/c from it, then every
        constraint, as a witness generator's output is checked."""
        import numpy as np

        from cuzk import progress
        from cuzk.errors import FormatError, WitnessError
        from cuzk.formats.wtns import parse_wtns
        from cuzk.prover.groth16 import synthesize_from_witness

        progress.step("witness (submitted)")
        try:
            witness = parse_wtns(ref.read(), "the submitted witness")
        except FormatError as e:
            raise WitnessError(str(e)) from None
        values = np.ascontiguousarray(witness.values, dtype=np.uint32)
        progress.step("a/b/c")
        synth = synthesize_from_witness(key.key.key, values, source="the submitted witness")
        progress.step("constraint check")
        circuit = key.key.circuit
        try:
            circuit.check_satisfied(values, synth.abc[2], key.key.terms)
        except WitnessError as e:
            what = str(e).split("): ", 1)[0] + ")"  # which constraint, how many fail
            raise WitnessError(
                f"the submitted {what}: was it computed for this circuit, from the inputs "
                "you meant?") from None
        return synth

    def witness_shape(self, proof_kind: str) -> WitnessShape:
        """From the kind's r1cs header (its field and wire count): what the key proves."""
        r1cs = self.circuit(proof_kind).r1cs
        return WitnessShape(curve=r1cs.curve.name, prime=r1cs.curve.r, n8=r1cs.curve.n8r,
                            n_vars=int(r1cs.n_wires),
                            n_public=int(r1cs.n_pub_out + r1cs.n_pub_in))

    def gpu_phase(self, key: KeyHandle, synthesis: Any, device: str) -> Any:
        """On a CUDA device, on a lane of its own (the device's other workers run meanwhile)."""
        from cuzk.prover import gpu_phase

        lanes = self._lanes.get(device)
        if lanes is None:
            return gpu_phase(key.key.key, synthesis, self._backends[device])
        with lanes.use() as lane:
            return gpu_phase(key.key.key, synthesis, lane)

    def gpu_steps(self, gpu_output: Any) -> Mapping[str, float]:
        return dict(gpu_output.steps_ms)

    def finalize(self, key: KeyHandle, synthesis: Any, gpu_output: Any) -> ProofResult:
        from cuzk.prover import finalize

        proof = finalize(key.key.key, synthesis, gpu_output,
                         verify_proof=self.settings.self_verify)
        return ProofResult(proof=proof.proof, public=list(proof.public))

    def release_abc(self, synthesis: Any) -> None:
        synthesis.release_abc()
