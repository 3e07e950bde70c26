// Probe: what an S8-sized split merge through distributed shared memory
// would cost (docs/perf_notes.md, session 49). S8's single-warpgroup kernel
// runs 128 blocks, (4 row tiles x 4 splits x 8 requests), each ending with a
// 64-row x 512-dim state; today every block stores it to global memory (bf16,
// 64 KB) and verify_split_merge_kernel reads the four splits back. A cluster
// of the four splits of one row tile could merge them instead: each block
// sends rows [16r, 16r + 16) of its state to cluster rank r, which sums the
// four. This times that exchange alone, in blocks shaped like the kernel's
// (256 threads, 200 KB of shared memory: one block an SM, 32 clusters of 4,
// of which the H200 holds 30 at once: the clock medians are per cluster):
//   global  each block stores its 64 KB bf16 state to global memory (today's
//           epilogue stores, for scale)
//   push32  f32 rows by st.shared::cluster to their owners (128 KB a block,
//           96 KB of it remote), then one cluster barrier
//   push16  the same as bf16 (64 KB, 48 KB remote)
//   pull16  each block writes its bf16 state to its own shared memory, one
//           cluster barrier, each owner reads its rows of all four by
//           ld.shared::cluster, one more barrier (the states must outlive
//           their readers)
// Each mode runs with clusters of 4 (S8's splits) and, for global, push16 and
// pull16, of 2 (pairs of splits merged before one state of the pair goes to
// global memory for the merge: global x2 stores that 32 KB state).
// Per mode: the median over blocks of the clocks from a first cluster barrier
// to the end, in us at the rated SM clock (cudaDevAttrClockRate), and the
// event time a launch over 200 launches. Also cudaOccupancyMaxActiveClusters
// for 2, 4, 8 blocks a cluster at the verify kernel's 227 KB.
// Build: nvcc -O3 -arch=sm_90a -std=c++17 -I src bench/probes/dsmem_exchange.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common/mma.cuh"  // smem_addr

#define CHECK(x)                                                                       \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

constexpr int kThreads = 256, kRows = 64, kDims = 512, kBlocks = 128;
constexpr size_t kSmem = 200 * 1024;
enum Mode { kGlobal, kPush32, kPush16, kPull16, kModes };
const char* kNames[kModes] = {"global", "push32", "push16", "pull16"};

__device__ unsigned cta_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ unsigned map_to(unsigned addr, unsigned rank) {
  unsigned out;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(out) : "r"(addr), "r"(rank));
  return out;
}
__device__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ void st_cluster(unsigned addr, uint4 v) {
  asm volatile("st.shared::cluster.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ uint4 ld_cluster(unsigned addr) {
  uint4 v;
  asm volatile("ld.shared::cluster.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

template <int kMode, int kSplits>
__global__ void __launch_bounds__(kThreads, 1) exchange(uint4* global_states, long long* clocks, float* sink) {
  constexpr int kOwnerRows = kRows / kSplits;
  extern __shared__ __align__(16) unsigned char smem[];
  const unsigned rank = cta_rank();
  const int block = blockIdx.z * gridDim.y + blockIdx.y;
  // The state this thread holds: values made from its index (registers).
  const uint4 v = make_uint4(threadIdx.x, block, rank, 7u);
  cluster_sync();
  const long long t0 = clock64();
  const unsigned base = kdtree::smem_addr(smem);
  if (kMode == kGlobal) {
    // 64 KB bf16 a block (a pair's merged state: 32 KB), 16 B a store,
    // consecutive threads consecutive chunks.
    constexpr int kChunks = kRows * kDims * 2 / 16 / (kSplits == 2 ? 2 : 1);
    uint4* dst = global_states + size_t(block) * kChunks;
    for (int i = threadIdx.x; i < kChunks; i += kThreads) dst[i] = make_uint4(v.x + i, v.y, v.z, v.w);
  } else if (kMode == kPush32 || kMode == kPush16) {
    // Row r of this block goes to rank r / kOwnerRows, to slot
    // [rank][r % kOwnerRows] there.
    constexpr int kChunksPerRow = kDims * (kMode == kPush32 ? 4 : 2) / 16;
    constexpr int kRowBytes = kChunksPerRow * 16;
    for (int i = threadIdx.x; i < kRows * kChunksPerRow; i += kThreads) {
      const int r = i / kChunksPerRow, chunk = i % kChunksPerRow;
      const unsigned at = base + (rank * kOwnerRows + r % kOwnerRows) * kRowBytes + chunk * 16;
      st_cluster(map_to(at, r / kOwnerRows), make_uint4(v.x + i, v.y, v.z, v.w));
    }
    cluster_sync();
    // The owner's sum of its rows over the cluster's splits (one value a
    // chunk, for the sink).
    float sum = 0.f;
    for (int i = threadIdx.x; i < kOwnerRows * kChunksPerRow; i += kThreads) {
      for (int s = 0; s < kSplits; ++s) {
        sum += __uint_as_float(reinterpret_cast<const uint4*>(smem)[(s * kOwnerRows) * kChunksPerRow + i].x);
      }
    }
    if (sum == 1.2345f) *sink = sum;
  } else {
    constexpr int kChunksPerRow = kDims * 2 / 16;
    constexpr int kRowBytes = kChunksPerRow * 16;
    for (int i = threadIdx.x; i < kRows * kChunksPerRow; i += kThreads) {
      reinterpret_cast<uint4*>(smem)[i] = make_uint4(v.x + i, v.y, v.z, v.w);
    }
    cluster_sync();
    float sum = 0.f;
    for (int i = threadIdx.x; i < kOwnerRows * kChunksPerRow; i += kThreads) {
      const int r = rank * kOwnerRows + i / kChunksPerRow, chunk = i % kChunksPerRow;
      uint4 got[kSplits];
#pragma unroll
      for (int s = 0; s < kSplits; ++s) got[s] = ld_cluster(map_to(base + r * kRowBytes + chunk * 16, s));
#pragma unroll
      for (int s = 0; s < kSplits; ++s) sum += __uint_as_float(got[s].x);
    }
    if (sum == 1.2345f) *sink = sum;
    cluster_sync();
  }
  __syncthreads();
  if (threadIdx.x == 0) clocks[block] = clock64() - t0;
}

// The launch of kBlocks blocks in clusters of `size` along y (a row tile's
// splits); `attribute` holds the cluster dimension the config points at.
cudaLaunchConfig_t cluster_launch(int size, size_t smem, cudaLaunchAttribute* attribute) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(1, size, kBlocks / size);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = smem;
  *attribute = {};
  attribute->id = cudaLaunchAttributeClusterDimension;
  attribute->val.clusterDim.x = 1;
  attribute->val.clusterDim.y = size;
  attribute->val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  return config;
}

template <int kMode, int kSplits>
void run(int sm_clock_khz, uint4* states, long long* clocks, float* sink) {
  cudaLaunchAttribute attribute;
  const cudaLaunchConfig_t config = cluster_launch(kSplits, kSmem, &attribute);
  CHECK(cudaFuncSetAttribute(exchange<kMode, kSplits>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem)));
  for (int i = 0; i < 20; ++i) CHECK(cudaLaunchKernelEx(&config, exchange<kMode, kSplits>, states, clocks, sink));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  constexpr int kReps = 200;
  CHECK(cudaEventRecord(e0));
  for (int i = 0; i < kReps; ++i) CHECK(cudaLaunchKernelEx(&config, exchange<kMode, kSplits>, states, clocks, sink));
  CHECK(cudaEventRecord(e1));
  CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, e0, e1));
  std::vector<long long> host(kBlocks);
  CHECK(cudaMemcpy(host.data(), clocks, host.size() * sizeof(long long), cudaMemcpyDeviceToHost));
  std::sort(host.begin(), host.end());
  const double per_us = sm_clock_khz / 1000.0;
  std::printf("%-7s x%d median %7lld clocks (%.2f us at %d MHz), max %7lld; launch-to-launch %.2f us\n", kNames[kMode], kSplits,
              host[host.size() / 2], host[host.size() / 2] / per_us, sm_clock_khz / 1000, host.back(),
              ms * 1000 / kReps);
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
}

int main() {
  int clock_khz = 0;
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  uint4* states;
  long long* clocks;
  float* sink;
  CHECK(cudaMalloc(&states, size_t(kBlocks) * kRows * kDims * 2));
  CHECK(cudaMalloc(&clocks, kBlocks * sizeof(long long)));
  CHECK(cudaMalloc(&sink, sizeof(float)));
  for (int size : {2, 4, 8}) {
    cudaLaunchAttribute attribute;
    const cudaLaunchConfig_t config = cluster_launch(size, 227 * 1024, &attribute);
    CHECK(cudaFuncSetAttribute(exchange<kPush16, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
    int clusters = 0;
    CHECK(cudaOccupancyMaxActiveClusters(&clusters, exchange<kPush16, 4>, &config));
    std::printf("max active clusters of %d at 227 KB a block: %d (%d blocks)\n", size, clusters, clusters * size);
  }
  run<kGlobal, 4>(clock_khz, states, clocks, sink);
  run<kPush32, 4>(clock_khz, states, clocks, sink);
  run<kPush16, 4>(clock_khz, states, clocks, sink);
  run<kPull16, 4>(clock_khz, states, clocks, sink);
  run<kGlobal, 2>(clock_khz, states, clocks, sink);
  run<kPush16, 2>(clock_khz, states, clocks, sink);
  run<kPull16, 2>(clock_khz, states, clocks, sink);
  return 0;
}
