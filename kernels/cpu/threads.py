"""How many BLAS threads the CPU path uses, given how many computations run at once.

Only CONVOLUTION_INTEGER's matrix products run on BLAS threads; every other CPU operator runs
on the thread that calls it. The service computes up to ``MAX_CONCURRENCY`` requests at once,
each in its own worker thread, and OpenBLAS's thread count is one setting for the whole
process. Giving BLAS ``cores // MAX_CONCURRENCY`` threads (at least one) keeps the busiest case,
every slot in a product at once, at one thread per core and never more: oversubscribed BLAS
threads spin and yield against each other and run slower than fewer threads. The price is that
a lone request uses only its share of the cores; raise the share by lowering
``MAX_CONCURRENCY``. With ``MAX_CONCURRENCY >= cores`` every product is single-threaded and
the requests themselves use the cores.
"""

from __future__ import annotations

import logging
import os

__all__ = ["blas_threads_for", "configure_threads"]

log = logging.getLogger(__name__)


def blas_threads_for(max_concurrency: int, cores: int | None = None) -> int:
    """BLAS threads per computation: the cores shared by the computations that run at once."""
    available = cores if cores is not None else len(os.sched_getaffinity(0))
    return max(1, available // max(1, max_concurrency))


def configure_threads(max_concurrency: int, cores: int | None = None) -> int:
    """Set the process's BLAS thread count for ``max_concurrency`` computations; returns it.

    Needs threadpoolctl (the ``server`` extra); the operators themselves do not.
    """
    from threadpoolctl import threadpool_limits

    threads = blas_threads_for(max_concurrency, cores)
    threadpool_limits(limits=threads, user_api="blas")
    log.info("BLAS threads per computation: %d (max_concurrency %d)", threads, max_concurrency)
    return threads
