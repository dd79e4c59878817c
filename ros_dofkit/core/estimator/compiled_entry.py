"""A compiled kernel called without numba's per-call typing, for arguments whose types are fixed.

Where you are: the ROS-free estimator core; imports nothing (it is handed numba dispatchers). The live node offers
every message to the rules (``rules.offer_imu``) with the same state, settings and buffers, named tuples of arrays:
numba's dispatcher types each argument on every call to pick the machine code, and for named tuples that typing is
most of the call (~4 us of an offer's ~10 on an idle machine; ~1 us through the entry point). :func:`compiled_entry`
looks the machine code up once and hands back its entry point (numba's own wrapper: it unboxes the arguments as the
compiled types and raises the kernel's exceptions as usual).

The entry trusts its arguments' types (an array of another dtype would be misread, not refused), so its caller
binds it to the fixed objects themselves and rebinds whenever one of them is replaced
(``Estimator._rebind_offers_on_first_use``), and passes the scalars as the Python types it was bound with (``int``,
``float``, ``bool``).
"""

from __future__ import annotations


def compiled_entry(kernel, example_args: tuple):
    """The machine code's entry point numba's dispatcher ``kernel`` would run for arguments of the types of
    ``example_args`` (compiled, or loaded from the kernel's cache, now): call it with arguments of exactly those
    types (the same fixed objects, scalars of the same Python types)."""
    return kernel.compile(tuple(kernel.typeof_pyval(value) for value in example_args))
