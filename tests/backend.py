"""The backend the service and SDK tests run the service on.

NumPy by default; `DMLSERVE_TEST_BACKEND=cupy python -m pytest tests/service tests/clients`
runs the same HTTP-level suites on the CuPy backend of a GPU host.
"""

from __future__ import annotations

import os

TEST_BACKEND = os.environ.get("DMLSERVE_TEST_BACKEND", "numpy")
