"""Run a circom 2 ``.wasm`` witness generator with wasmtime (no node at run time).

The protocol (what circom's generated ``witness_calculator.js`` does, reimplemented here):

* imports ``runtime.exceptionHandler(code)``, ``printErrorMessage()``, ``writeBufferMessage()``,
  ``showSharedRWMemory()``; messages are read a character at a time with ``getMessageChar()``.
* ``init(sanity)`` resets the instance; each input value is written limb by limb with
  ``writeSharedRWMemory(j, limb)`` (little-endian 32-bit limbs, normal form, reduced mod p) and
  then stored with ``setInputSignal(hMSB, hLSB, i)`` where (hMSB, hLSB) is the 64-bit FNV-1a hash
  of the signal name (top-level name, no indices) and i the position in the flattened array.
  ``getInputSignalSize(h)`` gives the flattened size (negative: no such input).
  The circuit runs when the last input value is set; a failed ``===`` or ``assert`` traps there.
* ``getWitness(i)`` puts witness value i into the shared buffer, read with ``readSharedRWMemory``.

Input signal names: the wasm only knows hashes, so naming a *missing* signal needs the list of
names. We read it from ``circuit.inputs.json`` (written next to the wasm at build time by
``write_input_signals``) or, failing that, derive it from circom's ``.sym`` file (every top-level
``main.<name>`` whose hash the wasm accepts as an input). Without either, a missing input is still
detected (the count falls short) but cannot be named.

Thread safety: the compiled module is shared; each call makes a private instance (store, about
1 ms), so concurrent calls never share wasm memory, and drops it after: an idle generator holds
no instance. With ``cache_dir`` (the server) the module itself is compiled in a child process
and mapped only while an instance uses it (``cuzk.witness.compiled``): between computations
the generator holds nothing but its figures.
"""

from __future__ import annotations

import json
import os
import re
import weakref
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import wasmtime

from cuzk.curves import Curve, curve_for_scalar_prime, unknown_scalar_prime
from cuzk.errors import FormatError, WitnessError
from cuzk.formats.wtns import write_wtns
from cuzk.logsafe import loggable
from cuzk.witness import compiled as _compiled

INPUTS_SUFFIX = ".inputs.json"
_EXCEPTIONS = {
    1: "signal not found",
    2: "too many signals set",
    3: "signal already set",
    4: "assert failed",
    5: "not enough memory",
    6: "input signal array access exceeds the size",
}
_INT_RE = re.compile(r"^[+-]?[0-9]+$")
_HEX_RE = re.compile(r"^0x[0-9a-fA-F]+$")
_PAGE = 65536


def fnv1a_64(name: str) -> int:
    """circom's signal-name hash (FNV-1a 64 over the UTF-16 code units, as JS charCodeAt)."""
    h = 0xCBF29CE484222325
    for ch in _code_units(name):
        h = ((h ^ ch) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def _code_units(s: str) -> Iterator[int]:
    data = s.encode("utf-16-le")
    for i in range(0, len(data), 2):
        yield data[i] | (data[i + 1] << 8)


def _func(exports: Any, name: str) -> wasmtime.Func:
    """A function the witness module must export (a FormatError when it does not)."""
    f = exports[name]
    if not isinstance(f, wasmtime.Func):
        raise FormatError("<wasm>", f"export {name!r} is not a function")
    return f


def _i32(v: int) -> int:
    return v - (1 << 32) if v & 0x80000000 else v


class _Trap(Exception):
    """Raised from a host import to abort the wasm call; the runner keeps the details."""


def _weak(runner: _Runner, method: Callable[..., None]) -> Callable[..., None]:
    """A host import calling ``method`` on ``runner`` without holding it. wasmtime keeps
    every host function in a module-level table until its store is freed, so a bound method
    there would hold its runner, and so its store, for ever: every instance ever made (its
    linear memory, its module) would leak."""
    ref = weakref.ref(runner)

    def call(*args: Any) -> None:
        me = ref()
        if me is not None:  # always, while wasm runs: its caller holds the runner
            method(me, *args)

    return call


class _Runner:
    """One wasm instance with its own store; used by one thread at a time."""

    def __init__(
        self,
        engine: wasmtime.Engine,
        module: wasmtime.Module,
        dump_module: wasmtime.Module | None = None,
    ) -> None:
        self.store = wasmtime.Store(engine)
        self.errors: list[str] = []
        self.exception_code: int | None = None
        self.log: list[str] = []  # complete lines the circuit logged
        self.line: list[str] = []  # the line being assembled
        void = wasmtime.FuncType([], [])
        handlers = {
            "exceptionHandler": wasmtime.Func(
                self.store,
                wasmtime.FuncType([wasmtime.ValType.i32()], []),
                _weak(self, _Runner._exception),
            ),
            "printErrorMessage": wasmtime.Func(self.store, void, _weak(self, _Runner._print_error)),
            "writeBufferMessage": wasmtime.Func(
                self.store, void, _weak(self, _Runner._write_buffer)
            ),
            "showSharedRWMemory": wasmtime.Func(
                self.store, void, _weak(self, _Runner._show_shared)
            ),
        }
        imports = []
        for imp in module.imports:
            if imp.module != "runtime" or imp.name not in handlers:
                raise FormatError("<wasm>", f"unexpected import {imp.module}.{imp.name}")
            imports.append(handlers[imp.name])
        inst = wasmtime.Instance(self.store, module, imports)
        ex = inst.exports(self.store)
        self.f = {
            name: _func(ex, name)
            for name in (
                "getVersion",
                "readSharedRWMemory",
                "writeSharedRWMemory",
                "init",
                "setInputSignal",
                "getInputSignalSize",
                "getRawPrime",
                "getFieldNumLen32",
                "getWitnessSize",
                "getInputSize",
                "getWitness",
                "getMessageChar",
                "getSharedRWMemoryStart",
            )
        }
        memory = ex["memory"]
        if not isinstance(memory, wasmtime.Memory):
            raise FormatError("<wasm>", "export 'memory' is not a memory")
        self.memory = memory
        self.n32 = self.call("getFieldNumLen32")
        self.shared = self.call("getSharedRWMemoryStart")
        self.dump: wasmtime.Func | None = None
        self.scratch = 0  # byte offset of the witness scratch area (pages we grew), 0: none yet
        if dump_module is not None:
            helper = wasmtime.Instance(self.store, dump_module, [ex["getWitness"], self.memory])
            self.dump = _func(helper.exports(self.store), "dump")

    def witness_bytes(self, n: int) -> bytes:
        """All n witness values, little-endian, n32 limbs each."""
        nbytes = 4 * self.n32
        if self.dump is None:
            out = bytearray(n * nbytes)
            for i in range(n):
                self.call("getWitness", i)
                out[i * nbytes : (i + 1) * nbytes] = self.memory.read(
                    self.store, self.shared, self.shared + nbytes
                )
            return bytes(out)
        if not self.scratch:
            # Fresh pages past everything circom uses (its memory is fixed-size): a private area.
            pages = -(-n * nbytes // _PAGE)
            self.scratch = self.memory.grow(self.store, pages) * _PAGE
        self.dump(self.store, n, self.shared, self.scratch, nbytes)
        return bytes(self.memory.read(self.store, self.scratch, self.scratch + n * nbytes))

    def call(self, name: str, *args: int) -> Any:
        return self.f[name](self.store, *args)

    def _message(self) -> str:
        chars = []
        while (c := self.call("getMessageChar")) != 0:
            chars.append(chr(c))
        return "".join(chars)

    def _exception(self, code: int) -> None:
        self.exception_code = code
        raise _Trap(code)

    def _print_error(self) -> None:
        self.errors.append(self._message())

    def _write_buffer(self) -> None:
        msg = self._message()
        if msg == "\n":  # circom's log() ends every line with a lone newline message
            self.log.append(" ".join(self.line))
            self.line.clear()
        else:
            self.line.append(msg)

    def _show_shared(self) -> None:
        self.line.append(str(self.read_shared_int()))

    def read_shared_int(self) -> int:
        raw = self.memory.read(self.store, self.shared, self.shared + 4 * self.n32)
        return int.from_bytes(raw, "little")

    def write_shared(self, limbs: list[int]) -> None:
        for j, limb in enumerate(limbs):
            self.call("writeSharedRWMemory", j, _i32(limb))


class WitnessCalculator:
    """A compiled circom witness generator; ``calculate`` is safe to call from many threads.

    ``cache_dir``: compile in a child process into that cache and map the module only while
    an instance uses it (what a long-lived server wants: ``cuzk.witness.compiled``); without
    it the module is compiled here and held (a one-off command).
    """

    def __init__(
        self,
        wasm_path: str | os.PathLike[str],
        input_signals: Mapping[str, int] | None = None,
        *,
        sym_path: str | os.PathLike[str] | None = None,
        cache_dir: Path | None = None,
    ) -> None:
        self.path = str(wasm_path)
        self._cache_dir = cache_dir
        self._module: wasmtime.Module | None = None
        self._dump: wasmtime.Module | None = None
        self._files: tuple[Path, Path] | None = None
        if cache_dir is not None:
            self._files = (
                _compiled.ensure_compiled(self.path, cache_dir),
                _compiled.ensure_dump_helper(cache_dir),
            )
        else:
            engine = _compiled.engine()
            try:
                self._module = wasmtime.Module.from_file(engine, self.path)
            except FileNotFoundError:
                raise FormatError(self.path, "file not found") from None
            except wasmtime.WasmtimeError as e:
                raise FormatError(
                    self.path, f"not a valid wasm module: {str(e).splitlines()[0]}"
                ) from None
            self._dump = wasmtime.Module(engine, bytes(wasmtime.wat2wasm(_compiled.DUMP_WAT)))
        try:
            probe = self._runner()
        except FormatError as e:
            raise FormatError(self.path, f"not a circom witness generator: {e.problem}") from None
        except (KeyError, wasmtime.WasmtimeError) as e:
            raise FormatError(self.path, f"not a circom witness generator ({e})") from None
        version = probe.call("getVersion")
        if version != 2:
            raise FormatError(
                self.path, f"circom witness generator version {version}; only circom 2 is supported"
            )
        self.n32: int = probe.n32
        probe.call("getRawPrime")
        self.prime: int = probe.read_shared_int()
        try:
            self.curve: Curve = curve_for_scalar_prime(self.prime)
        except KeyError:
            raise FormatError(self.path, unknown_scalar_prime(self.prime)) from None
        self.n_vars: int = probe.call("getWitnessSize")
        self.input_size: int = probe.call("getInputSize")
        self.input_signals = self._resolve_inputs(probe, input_signals, sym_path)
        scratch = -(-self.n_vars * 4 * self.n32 // _PAGE) * _PAGE
        self.instance_bytes: int = probe.memory.data_len(probe.store) + scratch
        """An instance's linear memory at its largest (circom's fixed memory and the pages the
        witness is copied out through): what one computation adds while it runs."""
        self.code_bytes: int = (
            sum(f.stat().st_size for f in self._files) if self._files is not None else 0
        )
        """The compiled code mapped while an instance runs (0: compiled here, held)."""

    @property
    def working_bytes(self) -> int:
        """What one witness computation holds while it runs, beyond its result."""
        return self.instance_bytes + self.code_bytes

    def _runner(self) -> _Runner:
        """A fresh instance, its module mapped from the cache for as long as it lives."""
        if self._files is None:
            assert self._module is not None
            return _Runner(_compiled.engine(), self._module, self._dump)
        assert self._cache_dir is not None
        module = _compiled.load(self._files[0], self.path, self._cache_dir)
        dump = _compiled.load(self._files[1], None, self._cache_dir)
        return _Runner(_compiled.engine(), module, dump)

    # -- input signal names -------------------------------------------------------------

    def signal_size(self, name: str) -> int:
        """Flattened size of an input signal, or -1 when the circuit has no such input."""
        return self._size(self._runner(), name)

    @staticmethod
    def _size(runner: _Runner, name: str) -> int:
        h = fnv1a_64(name)
        size = runner.call("getInputSignalSize", _i32(h >> 32), _i32(h & 0xFFFFFFFF))
        return size if size > 0 else -1  # circom answers 0 (older versions -1) for unknown names

    def _resolve_inputs(
        self,
        probe: _Runner,
        given: Mapping[str, int] | None,
        sym_path: str | os.PathLike[str] | None,
    ) -> dict[str, int] | None:
        names: list[str] | None = None
        source = "input signal list"
        if given is not None:
            names = list(given)
        else:
            sidecar = _sidecar_path(self.path)
            if sidecar.exists():
                source = str(sidecar)
                try:
                    data = json.loads(sidecar.read_text())
                    names = list(data["signals"])
                except (ValueError, KeyError, TypeError):
                    raise FormatError(
                        sidecar, "not an input signal list ({'signals': {name: size}})"
                    ) from None
            else:
                sym = Path(sym_path) if sym_path else _find_sym(self.path)
                if sym is not None:
                    source = str(sym)
                    names = [n for n in _sym_main_names(sym) if self._size(probe, n) >= 0]
        if names is None:
            return None
        out = {}
        for n in names:
            size = self._size(probe, n)
            if size < 0:
                raise FormatError(
                    source, f"lists input signal '{n}', which {self.path} does not have"
                )
            out[n] = size
        if sum(out.values()) != self.input_size:
            raise FormatError(
                source,
                f"lists {sum(out.values())} input values but {self.path} expects {self.input_size}",
            )
        return out

    # -- calculation ----------------------------------------------------------------------

    def calculate(self, inputs: Mapping[str, Any]) -> np.ndarray:
        """Witness for ``inputs`` as ``(n_vars, n32)`` uint32, normal form (as in a .wtns file)."""
        if not isinstance(inputs, Mapping):
            raise WitnessError(
                f"inputs must be a JSON object of signal names, got {type(inputs).__name__}"
            )
        runner = self._runner()
        prepared = self._prepare(runner, inputs)
        self._run(runner, prepared)
        return self._read_witness(runner)

    def calculate_wtns(self, inputs: Mapping[str, Any], path: str | os.PathLike[str]) -> np.ndarray:
        """Calculate and write a .wtns file identical to ``snarkjs wtns calculate``'s."""
        w = self.calculate(inputs)
        write_wtns(path, w, self.curve)
        return w

    def _prepare(
        self, runner: _Runner, inputs: Mapping[str, Any]
    ) -> list[tuple[str, int, list[int]]]:
        prepared = []
        for name, value in inputs.items():
            if not isinstance(name, str):
                raise WitnessError(f"input signal names must be strings, got {name!r}")
            size = self._size(runner, name)
            if size < 0:
                known = f" (inputs: {', '.join(self.input_signals)})" if self.input_signals else ""
                raise WitnessError(
                    f"unknown input signal '{loggable(name)}': the circuit has no such input{known}"
                )
            values = [self._to_field(name, path, v) for path, v in _flatten(value)]
            if len(values) != size:
                raise WitnessError(
                    f"input signal '{loggable(name)}' needs {size} "
                    f"value{'s' if size != 1 else ''}, got {len(values)}"
                )
            h = fnv1a_64(name)
            prepared.append((name, h, values))
        if self.input_signals is not None:
            missing = [n for n in self.input_signals if n not in inputs]
            if missing:
                parts = ", ".join(f"'{n}' ({self.input_signals[n]} values)" for n in missing)
                raise WitnessError(f"missing input signal{'s' if len(missing) > 1 else ''} {parts}")
        total = sum(len(v) for _, _, v in prepared)
        if total < self.input_size:
            raise WitnessError(
                f"missing input signals: {total} of {self.input_size} input values given "
                "(this circuit's input names are unknown: no .inputs.json or .sym next to its wasm)"
            )
        return prepared

    def _to_field(self, name: str, path: str, v: Any) -> int:
        where = f"'{loggable(name + path)}'"
        if isinstance(v, bool) or v is None:
            raise WitnessError(f"value of input signal {where} is not a number: {json.dumps(v)}")
        if isinstance(v, int):
            n = v
        elif isinstance(v, float):
            if not v.is_integer() or abs(v) > 2**53:
                raise WitnessError(f"value of input signal {where} is not an exact integer: {v!r}")
            n = int(v)
        elif isinstance(v, str):
            s = v.strip()
            if _INT_RE.match(s):
                n = int(s, 10)
            elif _HEX_RE.match(s):
                n = int(s, 16)
            else:
                raise WitnessError(f"value of input signal {where} is not a number: {v!r}")
        else:
            raise WitnessError(f"value of input signal {where} is not a number: {type(v).__name__}")
        if not -self.prime < n < self.prime:  # refused, as the server refuses it: never reduced
            raise WitnessError(
                f"value of input signal {where} is not below r (the scalar field order, a"
                f" {len(str(self.prime))}-digit number): {v if len(str(v)) <= 90 else '...'}"
            )
        return n % self.prime

    def _run(self, runner: _Runner, prepared: list[tuple[str, int, list[int]]]) -> None:
        runner.call("init", 0)
        n32 = self.n32
        mask = 0xFFFFFFFF
        for name, h, values in prepared:
            hi, lo = _i32(h >> 32), _i32(h & mask)
            for i, v in enumerate(values):
                runner.write_shared([(v >> (32 * j)) & mask for j in range(n32)])
                try:
                    runner.call("setInputSignal", hi, lo, i)
                except (wasmtime.Trap, wasmtime.WasmtimeError, _Trap) as e:
                    raise WitnessError(self._failure(runner, name, i, e)) from None

    def _failure(self, runner: _Runner, name: str, i: int, exc: BaseException) -> str:
        code = runner.exception_code
        what = (
            _EXCEPTIONS.get(code, f"error code {code}") if code is not None else "the wasm trapped"
        )
        detail = " ".join(m.strip() for m in runner.errors if m.strip())
        if code is None and not detail:
            detail = str(exc).splitlines()[0] if str(exc) else ""
        last = [*runner.log, " ".join(runner.line)][-5:]
        logs = "; ".join(m for m in last if m)
        if code == 4:  # runs when the last input is set, so blame the circuit's own message
            logs = f" ({logs})" if logs else ""
            return f"inputs do not satisfy the circuit{logs}: {what}: {detail}"
        logs = f"; circuit log: {logs}" if logs else ""
        return f"witness generation failed at input signal '{name}[{i}]': {what}: {detail}{logs}"

    def _read_witness(self, runner: _Runner) -> np.ndarray:
        raw = runner.witness_bytes(self.n_vars)
        return np.frombuffer(raw, dtype="<u4").reshape(self.n_vars, self.n32).astype(np.uint32)


def _flatten(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Flatten nested arrays the way circom does (row-major), remembering each element's index."""
    if isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from _flatten(v, f"{path}[{i}]")
    else:
        yield path, value


def _sidecar_path(wasm_path: str) -> Path:
    p = Path(wasm_path)
    return p.with_name(p.stem + INPUTS_SUFFIX)


def _find_sym(wasm_path: str) -> Path | None:
    """circom writes X_js/X.wasm and X.sym side by side in the output folder; we also accept the
    .sym next to the wasm."""
    p = Path(wasm_path)
    for cand in (p.with_suffix(".sym"), p.parent.parent / (p.stem + ".sym")):
        if cand.exists():
            return cand
    return None


def _sym_main_names(sym: Path) -> list[str]:
    """Distinct top-level signal names of ``main`` in a .sym file, in file order."""
    seen: dict[str, None] = {}
    try:
        with open(sym) as f:
            for line in f:
                parts = line.rstrip("\n").split(",", 3)
                if len(parts) != 4 or not parts[3].startswith("main."):
                    continue
                rest = parts[3][5:]
                base = rest.split("[", 1)[0]
                if "." in base:  # a sub-component's signal
                    continue
                seen.setdefault(base, None)
    except OSError as e:
        raise FormatError(sym, f"cannot read: {e.strerror or e}") from None
    return list(seen)


def input_signals_from_sym(
    wasm_path: str | os.PathLike[str], sym_path: str | os.PathLike[str]
) -> dict[str, int]:
    """Input signal names and sizes of a circuit, from its .sym file checked against its wasm."""
    calc = WitnessCalculator(wasm_path, sym_path=sym_path)
    if calc.input_signals is None:  # pragma: no cover - sym_path given, so always resolved
        raise FormatError(sym_path, "no input signals found")
    return calc.input_signals


def write_input_signals(path: str | os.PathLike[str], signals: Mapping[str, int]) -> None:
    """Write the ``<circuit>.inputs.json`` sidecar that names a circuit's input signals."""
    Path(path).write_text(json.dumps({"signals": dict(signals)}, indent=2) + "\n")
