#!/usr/bin/env bash
# Regenerate the Python modules of Triton's KServe v2 gRPC protos (grpc_service.proto and
# model_config.proto, from triton-inference-server/common, BSD-3-Clause: LICENSE here).
#
# The generated modules are committed, so neither an install nor the image needs grpcio-tools.
# Run after replacing a .proto, with grpcio-tools in the active environment (the version whose
# protobuf the server's pin allows): service/rpc/third_party/triton/generate.sh
#
# Two edits to protoc's output: imports become relative (the modules live in a package), and
# descriptors go to a descriptor pool of their own (`_pool.POOL`), so they never clash with
# another copy of the same protos in one process (tritonclient's, KServe's).
set -euo pipefail
cd "$(dirname "$0")"
python -m grpc_tools.protoc -I. --python_out=. --pyi_out=. grpc_service.proto model_config.proto
for f in grpc_service_pb2.py model_config_pb2.py; do
  sed -i \
    -e 's/^import model_config_pb2 as /from . import model_config_pb2 as /' \
    -e 's/_descriptor_pool\.Default()\.AddSerializedFile(/_POOL.AddSerializedFile(/' \
    -e 's/^# @@protoc_insertion_point(imports)$/from ._pool import POOL as _POOL\n&/' \
    "$f"
  grep -q '_POOL.AddSerializedFile(' "$f" || { echo "generate.sh: protoc output changed: $f" >&2; exit 1; }
done
sed -i -e 's/^import model_config_pb2 as /from . import model_config_pb2 as /' grpc_service_pb2.pyi
