"""Named defaults of the SDK; one place to read (and tune) them."""

from __future__ import annotations

from typing import Final

import httpx

from dmlserve.kernels.wire import HEADER_LENGTH

#: Whole-call limit 10 minutes (a large CONVOLUTION_INTEGER on a CPU host is slow), connect 5 s.
DEFAULT_TIMEOUT: Final = httpx.Timeout(timeout=600.0, connect=5.0)
DEFAULT_MAX_RETRIES: Final = 2

#: Exponential backoff: INITIAL_RETRY_DELAY * 2**attempt, capped, times a jitter in (0.75, 1].
INITIAL_RETRY_DELAY: Final = 0.5
MAX_RETRY_DELAY: Final = 8.0
#: A server's Retry-After is honoured up to this many seconds; beyond it the backoff applies.
MAX_RETRY_AFTER: Final = 60.0
#: Statuses that say "try again later": the queue is full (429), not ready or out of memory (503).
RETRYABLE_STATUSES: Final = frozenset({429, 503})

REQUEST_ID_HEADER: Final = "X-Request-ID"
BINARY_HEADER_LENGTH: Final = HEADER_LENGTH
BINARY_CONTENT_TYPE: Final = "application/octet-stream"
JSON_CONTENT_TYPE: Final = "application/json"
