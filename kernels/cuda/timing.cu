// A GPU-side wait for code that times work on a stream: queued ahead of the work, it keeps the
// GPU busy while the host queues the work behind it, so events around the work time the GPU's
// part alone, not the host's launches.

namespace dml {

// One thread spins for `clocks` SM clocks.
__global__ void spin(long long clocks) {
    const long long start = clock64();
    while (clock64() - start < clocks) {
    }
}

}  // namespace dml
