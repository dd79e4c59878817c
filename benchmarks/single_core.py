"""One core for a benchmark: thread pools of one and a single CPU, so that speed ratios compare single-core work.

Where you are: ``benchmarks/`` (not part of the package). ``limit_threads()`` must run before NumPy (BLAS) or numba
is imported, which is why this module imports neither; a benchmark calls it at the top of its script, under
``if __name__ == "__main__":`` (importing a benchmark module must not change the environment), and calls
``pin_to_one_cpu()`` when it starts measuring.
"""

import os

THREAD_VARIABLES = ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def limit_threads() -> None:
    """One thread for numba, OpenMP and the BLAS libraries (read when they are first imported)."""
    for variable in THREAD_VARIABLES:
        os.environ[variable] = "1"


def pin_to_one_cpu() -> None:
    """Restrict this process (and the children it starts) to the last CPU it may run on."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
