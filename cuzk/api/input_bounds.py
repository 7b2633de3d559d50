"""What a submit's body may cost, known before it is parsed.

Parsing JSON into Python objects costs CPU and memory in proportion to the body, and validating
the values costs more: a 2 MB body holding a 10^6-element array once took 13-43 s of CPU before
its 422, and one 8 MiB body added about 950 MB of RSS (issue 19). A proof kind's inputs are
known from its circuit: one partition holds a fixed number of field elements (the r1cs's input
signals, arrays flattened), each at most a 77-digit decimal or 0x-hex string. So a body is
refused with 413 while it is read once it passes what the largest configured kind could need,
and after the kind is known once it passes that kind's bound; and the memory its parsing takes
is reserved from the engine's host budget first (503 when not free), so requests cannot grow the
process past what the budget protects.
"""

from __future__ import annotations

PER_ELEMENT_BYTES = 256
"""Room per input element: the value as a quoted string (at most 157 characters, see
``cuzk.api.signals``), a share of its signal's name, separators and indentation."""
OVERHEAD_BYTES = 64 * 1024
"""Room for everything else in a body: field names, proof kind, request_id, priority, spacing."""
PARSE_BYTES_PER_BODY_BYTE = 40
"""Peak memory of parsing and checking, per body byte, bounded from above: the body, its text,
and the objects ``json.loads`` builds (the densest, ``[1,1,...]`` or ``[{},{},...]``, cost
18-24 bytes of objects per body byte; strings and numbers less)."""


WITNESS_CHECK_BYTES = 16 << 20
"""What checking a witness body holds in memory, whatever its size: the body goes to a file
as it arrives (never into memory) and is checked through an mmap a slice at a time
(``cuzk.formats.wtns.CHECK_ROWS`` values, hashed in 8 MiB slices), so this bounds the
temporaries, taken from the request parse reserve like a JSON body's parsing."""


def witness_body_limit(partitions: int, n_vars: int, n8: int) -> int:
    """The exact size of a witness submit's body for a kind: one .wtns per partition, each
    of the size a witness of ``n_vars`` values of ``n8`` bytes has."""
    from cuzk.formats.wtns import wtns_file_bytes

    return partitions * wtns_file_bytes(n_vars, n8)


def kind_body_limit(partitions: int, elements: int) -> int:
    """The largest body a submit of a kind with ``partitions`` partitions of ``elements``
    input elements each can need."""
    return partitions * elements * PER_ELEMENT_BYTES + OVERHEAD_BYTES


def parse_reservation(body_bytes: int) -> int:
    """Host bytes to hold while a body of ``body_bytes`` is parsed and checked."""
    return body_bytes * PARSE_BYTES_PER_BODY_BYTE
