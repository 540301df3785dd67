"""dmlserve: DirectML's FOLD, UNFOLD, PADDING, AVERAGE_POOLING and CONVOLUTION_INTEGER as a service.

`dmlserve.kernels` holds the operators (descriptors, NumPy and CuPy backends),
`dmlserve.clients` the Python SDK, `dmlserve.service` the HTTP server (the `server` extra).
"""

__version__ = "0.1.0"
