"""Witness generators compiled in a child process, kept on disk and mapped only while in use.

Why: wasmtime's compiler (Cranelift) peaks at about 80 MiB while it compiles one bundled
circuit's generator and leaves 3-15 MiB of freed heap in the process's malloc arenas, which no
memory budget can see; the compiled code itself is 3-4 MiB. A server that compiles in a child
process (once per wasm and wasmtime version: the file is cached) and maps the result
(``Module.deserialize_file``: file-backed pages, faulted in as the code runs) holds none of the
compiler's memory, and nothing at all of a generator between two witness computations.

The cache holds native code that the process maps and runs: it lives under the engine's
``keys_dir`` (``witness/``), which must be as private as the proving keys there. A cache that
cannot be written is replaced by a private temporary directory for the process's lifetime.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import wasmtime

from cuzk.errors import FormatError
from cuzk.tools import python_module_command

log = logging.getLogger(__name__)

SUFFIX = ".cwasm"
COMPILE_TIMEOUT_S = 600.0
"""A child compiling one generator: a bound, far above the seconds a 2^20 circuit takes."""

# Copies the whole witness out in one call: calling getWitness once per value from Python costs
# ~40 us each through the wasmtime binding (a second for a 25k-signal circuit). This helper runs
# the same getWitness calls inside wasm and memory.copy's each value into a scratch area.
DUMP_WAT = """
(module
  (import "circom" "getWitness" (func $get (param i32)))
  (import "circom" "memory" (memory 1))
  (func (export "dump") (param $n i32) (param $src i32) (param $dst i32) (param $len i32)
    (local $i i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (call $get (local.get $i))
        (memory.copy
          (i32.add (local.get $dst) (i32.mul (local.get $i) (local.get $len)))
          (local.get $src) (local.get $len))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next))))
)
"""

_engine: wasmtime.Engine | None = None
_lock = threading.Lock()
_fallback: Path | None = None


def engine() -> wasmtime.Engine:
    """The process's one wasmtime engine (its default configuration, which the child's matches:
    a compiled file is only valid for the configuration that made it)."""
    global _engine
    with _lock:
        if _engine is None:
            _engine = wasmtime.Engine()
        return _engine


def _version() -> str:
    from importlib.metadata import version

    return version("wasmtime")


def cache_name(wasm: bytes) -> str:
    """The compiled file's name: the wasm's and the compiler's identity."""
    h = hashlib.sha256(_version().encode() + b"\0" + wasm)
    return h.hexdigest()[:32] + SUFFIX


def _writable(cache_dir: Path) -> Path:
    """``cache_dir`` (created), or a private temporary one when it cannot be written."""
    global _fallback
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        if os.access(cache_dir, os.W_OK):
            return cache_dir
    except OSError:
        pass
    with _lock:
        if _fallback is None:
            _fallback = Path(tempfile.mkdtemp(prefix="cuzk-witness-"))
            log.warning(
                "cannot write compiled witness generators to %s; using %s until exit",
                cache_dir,
                _fallback,
            )
        return _fallback


def ensure_compiled(wasm_path: str | os.PathLike[str], cache_dir: Path) -> Path:
    """The compiled file of ``wasm_path``, compiled in a child process if not cached yet. A
    file that is not a wasm module is a FormatError, as an in-process compile says it."""
    path = Path(wasm_path)
    try:
        wasm = path.read_bytes()
    except FileNotFoundError:
        raise FormatError(path, "file not found") from None
    except OSError as e:
        raise FormatError(path, f"cannot read: {e.strerror or e}") from None
    return _ensure(wasm, path, cache_dir)


def ensure_dump_helper(cache_dir: Path) -> Path:
    """The compiled witness-copy helper (``DUMP_WAT``), cached like a generator."""
    return _ensure(bytes(wasmtime.wat2wasm(DUMP_WAT)), Path("<witness copy helper>"), cache_dir)


def _ensure(wasm: bytes, source: Path, cache_dir: Path) -> Path:
    directory = _writable(cache_dir)
    out = directory / cache_name(wasm)
    if out.exists():
        return out
    fd, tmp_name = tempfile.mkstemp(dir=directory, prefix=".compiling-", suffix=SUFFIX)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        _compile_in_child(wasm, source, tmp)
        tmp.replace(out)  # atomic: a reader sees no file or a whole one
    finally:
        tmp.unlink(missing_ok=True)
    return out


def _compile_in_child(wasm: bytes, source: Path, out: Path) -> None:
    try:
        child = subprocess.run(
            # -P: a cuzk/ in the working directory (a checkout) must not shadow the package
            python_module_command("cuzk.witness.compiled", str(out)),
            input=wasm,
            capture_output=True,
            timeout=COMPILE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise FormatError(source, f"compiling it took over {COMPILE_TIMEOUT_S:.0f} s") from None
    if child.returncode == 2:
        problem = child.stderr.decode(errors="replace").strip().splitlines()
        raise FormatError(source, f"not a valid wasm module: {problem[-1] if problem else '?'}")
    if child.returncode != 0:
        tail = child.stderr.decode(errors="replace").strip().splitlines()[-1:]
        raise RuntimeError(
            f"compiling {source} in a child process failed "
            f"(exit {child.returncode}): {' '.join(tail)}"
        )


def load(
    compiled: Path, wasm_path: str | os.PathLike[str] | None, cache_dir: Path
) -> wasmtime.Module:
    """Map a compiled file. One that does not load (damaged, or made by another build) is
    compiled again once, from ``wasm_path`` (None: the copy helper)."""
    try:
        return wasmtime.Module.deserialize_file(engine(), str(compiled))
    except wasmtime.WasmtimeError as e:
        log.warning("recompiling %s: %s", compiled, str(e).splitlines()[0])
    compiled.unlink(missing_ok=True)
    again = (
        ensure_dump_helper(cache_dir)
        if wasm_path is None
        else ensure_compiled(wasm_path, cache_dir)
    )
    return wasmtime.Module.deserialize_file(engine(), str(again))


def main(argv: list[str]) -> int:
    """Child: compile the wasm on stdin into the file ``argv[0]``; exit 2 for a bad module."""
    wasm = sys.stdin.buffer.read()
    try:
        module = wasmtime.Module(wasmtime.Engine(), wasm)
    except wasmtime.WasmtimeError as e:
        print(str(e).splitlines()[0], file=sys.stderr)
        return 2
    Path(argv[0]).write_bytes(module.serialize())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
