"""KServe v2 over gRPC: `inference.GRPCInferenceService` beside the HTTP server.

`server` runs a `grpc.aio` server on the HTTP server's event loop (started and stopped by the
app's lifespan) and maps service errors to gRPC status codes; `infer` is ModelInfer's exchange
with the request pipeline (the same decode, bind, limiter, device and encode as `/v2` over HTTP);
`handlers` implements the other RPCs on the same state (model configuration, statistics and
the repository through the modules the HTTP routes use); `third_party.triton` Triton's protos
and the protobuf modules generated from them.
"""
