// mma_peak.cu - the card's peak rate of mma.sync bf16 (m16n8k16, fp32 accumulate),
// the MMA ceiling of the verify floor (SPEC section 6).
//
// Every warp keeps kChains independent accumulator tiles in registers and feeds
// each one a long chain of mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// from register operands: no memory traffic, no shared memory, only the tensor
// pipe. kChains independent chains per warp times several warps per SM
// sub-partition hide the instruction's latency; the grid is the occupancy limit
// times the SM count, so every SM is busy for the whole launch. The rate is
// the median of event-timed launches after a warm-up.
//
// Build: nvcc -O3 -arch=sm_90 -o mma_peak mma_peak.cu
// Run:   ./mma_peak [steps per chain, default 65536] [device, default 0]
// Output: human-readable lines, then "TFLOPS <value>" for bench.py to parse.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK_CUDA(call)                                                           \
  do {                                                                             \
    cudaError_t err_ = (call);                                                     \
    if (err_ != cudaSuccess) {                                                     \
      std::fprintf(stderr, "mma_peak: %s failed: %s\n", #call,                     \
                   cudaGetErrorString(err_));                                      \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

namespace {

constexpr int kThreads = 256;             // 8 warps per block
constexpr int kChains = 8;                // independent accumulator tiles per warp
constexpr double kFlopsPerMma = 2.0 * 16 * 8 * 16;  // m16n8k16
constexpr int kTimedLaunches = 15;

// A bf16 pair in [1, 2) or (-2, -1] with thread-dependent mantissas: random-looking
// finite data (zeros run faster than real data on this hardware) that keeps the
// accumulators far from overflow over the chain.
__device__ uint32_t bf16_pair(uint32_t h) {
  h ^= h >> 15;
  h *= 0x2c1b3c6du;
  h ^= h >> 12;
  uint32_t lo = 0x3f80u | (h & 0x7fu) | ((h >> 7) & 1u) << 15;
  uint32_t hi = 0x3f80u | ((h >> 8) & 0x7fu) | ((h >> 15) & 1u) << 15;
  return lo | hi << 16;
}

__global__ void __launch_bounds__(kThreads) mma_chains(float* sink, int steps) {
  const uint32_t seed = (blockIdx.x * kThreads + threadIdx.x) * 2654435761u;
  uint32_t a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = bf16_pair(seed + i);
  for (int i = 0; i < 2; ++i) b[i] = bf16_pair(seed + 7 + i);

  float acc[kChains][4];
  for (int c = 0; c < kChains; ++c)
    for (int i = 0; i < 4; ++i) acc[c][i] = 0.0f;

#pragma unroll 2
  for (int s = 0; s < steps; ++s) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) {
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
          "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
          : "+f"(acc[c][0]), "+f"(acc[c][1]), "+f"(acc[c][2]), "+f"(acc[c][3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
  }

  float total = 0.0f;
  for (int c = 0; c < kChains; ++c)
    for (int i = 0; i < 4; ++i) total += acc[c][i];
  sink[blockIdx.x * kThreads + threadIdx.x] = total;  // keeps every chain live
}

}  // namespace

int main(int argc, char** argv) {
  // steps per chain; 65536 makes one launch about 15-20 ms on an H200.
  const int steps = argc > 1 ? std::atoi(argv[1]) : 65536;
  const int device = argc > 2 ? std::atoi(argv[2]) : 0;
  CHECK_CUDA(cudaSetDevice(device));
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
  int blocks_per_sm = 0;
  CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, mma_chains,
                                                           kThreads, 0));
  if (blocks_per_sm < 1) {
    std::fprintf(stderr, "mma_peak: kernel cannot be resident on this device\n");
    return 1;
  }
  const int grid = blocks_per_sm * prop.multiProcessorCount;

  float* sink = nullptr;
  CHECK_CUDA(cudaMalloc(&sink, sizeof(float) * grid * kThreads));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));

  mma_chains<<<grid, kThreads>>>(sink, steps);  // warm-up: module load, clocks up
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());

  std::vector<float> ms(kTimedLaunches);
  for (int r = 0; r < kTimedLaunches; ++r) {
    CHECK_CUDA(cudaEventRecord(start));
    mma_chains<<<grid, kThreads>>>(sink, steps);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaEventRecord(stop));
    CHECK_CUDA(cudaEventSynchronize(stop));
    CHECK_CUDA(cudaEventElapsedTime(&ms[r], start, stop));
  }
  std::sort(ms.begin(), ms.end());
  const double median_s = ms[kTimedLaunches / 2] * 1e-3;
  const double flops =
      kFlopsPerMma * kChains * static_cast<double>(steps) * grid * (kThreads / 32);
  const double tflops = flops / median_s / 1e12;

  std::printf("device: %s (sm_%d%d, %d SMs, %d blocks/SM of %d threads)\n", prop.name,
              prop.major, prop.minor, prop.multiProcessorCount, blocks_per_sm, kThreads);
  std::printf("mma.sync m16n8k16 bf16 -> f32: median %.3f ms for %.3e flop "
              "(min %.3f ms, max %.3f ms)\n",
              ms[kTimedLaunches / 2], flops, ms.front(), ms.back());
  std::printf("TFLOPS %.3f\n", tflops);

  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  CHECK_CUDA(cudaFree(sink));
  return 0;
}
