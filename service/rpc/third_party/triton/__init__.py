"""Triton's KServe v2 gRPC protos (`inference` package) and their generated modules.

The `.proto` files are NVIDIA's, from triton-inference-server/common (BSD-3-Clause: LICENSE
here), unchanged. The `_pb2` modules are generated from them by `generate.sh` with grpcio-tools;
do not edit them by hand. `_pool` and `generate.sh` are dmlserve's.
"""
