"""Give back the file pages a key load read and proving does not.

Loading a key reads every page of its zkey (the points are checked): they stay mapped in this
process, in its RSS beside the ledger's figure for the key (issue 27: 45 MiB over a 49 MiB
figure at 2^16 constraints). After a load the prover unmaps them from this process; the ones
proving reads (the point rows, which the ledger counts) fault back in from the page cache.
"""

from __future__ import annotations

import mmap
from typing import Any


def mapping_of(array: Any) -> mmap.mmap | None:
    """The file mapping an array views (through its bases), or None for memory of its own."""
    base = array
    while base is not None:
        if isinstance(base, mmap.mmap):
            return base
        base = getattr(base, "base", None)
    return None


def drop_mapped_pages(array: Any) -> bool:
    """Unmap from this process the pages of the file ``array`` views (they stay in the page
    cache; a later read faults them back in). False when it views no file."""
    mapping = mapping_of(array)
    if mapping is None or mapping.closed:
        return False
    mapping.madvise(mmap.MADV_DONTNEED)
    return True
