// wgmma_smem_rates.cu - what the sm_90a verify kernels' warpgroup MMAs cost
// against shared memory, alone and beside a stream of cp.async copies into
// shared memory (the gather's refills). One block per SM, 256 threads:
//   warpgroup 0 issues a long run of one wgmma shape and times it (clock64):
//     qk_ss   m64n64k16, A and B from shared memory (the QK, Q and K in smem)
//     qk_rs   m64n64k16, A from registers (Q's fragments), B from smem
//     pv_rs   m64n256k16, A from registers (P), B from smem read MN-major (V)
//     pv_ss   m64n256k16, A and B from smem (the other warpgroup's P)
//     none    no wgmma (the copy stream's own rate)
//   warpgroup 1 (with "+copy") streams 16-byte cp.async copies of an
//     L2-resident buffer into a 64 KB smem region, two batches in flight,
//     until warpgroup 0 is done, and reports its bytes per clock.
// The operands are the kernels' 128-byte-swizzled [64 rows][128 B] blocks.
// Shared memory moves 128 B per clock per SM; qk_ss asks 4 KB per wgmma
// (A 2 KB + B 2 KB), so at the tensor pipe's m64n64k16 rate (32 clocks) it
// alone would use all of it.
//
// Build: nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -I../src
//          -o wgmma_smem_rates wgmma_smem_rates.cu
// Run:   ./wgmma_smem_rates        (every mode, one line each)
#include "common/mma.cuh"
#include "common/wgmma.cuh"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK_CUDA(call)                                                                      \
  do {                                                                                        \
    cudaError_t err_ = (call);                                                                \
    if (err_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "wgmma_smem_rates: %s failed: %s\n", #call, cudaGetErrorString(err_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

using namespace kdtree;
using T = __nv_bfloat16;

namespace {

enum Mode : int { kQkSs = 0, kQkRs, kPvRs, kPvSs, kNone };
const char* const kModeNames[] = {"qk_ss", "qk_rs", "pv_rs", "pv_ss", "none"};

constexpr int kThreads = 256;  // 255 registers each: no wgmma serialized for want of them
constexpr int kBlock = 8192;              // one [64][128 B] column block
constexpr int kOffA = 0;                  // 9 blocks: Q (A operand)
constexpr int kOffB = 9 * kBlock;         // 9 blocks: K / V (B operand)
constexpr int kOffCopy = 18 * kBlock;     // 64 KB: the copy stream's target
constexpr int kCopyBytes = 64 * 1024;
constexpr int kOffFlag = kOffCopy + kCopyBytes;
constexpr int kSmem = kOffFlag + 1024 + 1024;  // + flag, + alignment slack
constexpr int kReps = 256;                // timed runs of 36 (QK) or 16 (P V) wgmmas

struct Result {
  long long mma_clocks;   // warpgroup 0, kReps runs
  long long copy_clocks;  // warpgroup 1
  long long copy_bytes;
  float sink;
};

template <int kMode, bool kCopy>
__global__ void __launch_bounds__(kThreads, 1) rates(const uint4* src, int src_vecs, Result* out) {
  extern __shared__ __align__(1024) unsigned char raw[];
  unsigned char* smem = raw + ((1024 - (smem_addr(raw) & 1023)) & 1023);
  const uint32_t base = smem_addr(smem);
  volatile int* done = reinterpret_cast<volatile int*>(smem + kOffFlag);
  // Operands: small finite bf16 values (1 + a few mantissa bits, alternating sign).
  for (int i = threadIdx.x; i < 18 * kBlock / 4; i += kThreads) {
    reinterpret_cast<uint32_t*>(smem)[i] = 0x3f80bf80u ^ ((i * 2654435761u) & 0x007f007fu);
  }
  if (threadIdx.x == 0) *done = 0;
  fence_proxy_async_smem();
  __syncthreads();
  const int wg = threadIdx.x / 128;

  if (wg == 0) {
    constexpr bool kPv = kMode == kPvRs || kMode == kPvSs;
    float d[kPv ? 128 : 32];  // the mode's accumulator: P V's m64n256 or the QK's m64n64
#pragma unroll
    for (int i = 0; i < (kPv ? 128 : 32); ++i) d[i] = 0.f;
    // Four A fragments (as Q's rope block or P's four k-steps in the kernels).
    uint32_t a_frag[4][4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
#pragma unroll
      for (int i = 0; i < 4; ++i) a_frag[k][i] = 0x3f803f80u ^ (((threadIdx.x + 5 * k + i) * 0x9e3779b9u) & 0x007f807fu);
    }
    const uint64_t a_desc = wgmma_desc_sw128(base + kOffA, 16, 1024);
    const uint64_t k_desc = wgmma_desc_sw128(base + kOffB, 16, 1024);
    const uint64_t v_desc = wgmma_desc_sw128(base + kOffB, kBlock, 1024);
    const long long t0 = clock64();
    for (int rep = 0; rep < kReps; ++rep) {
      wgmma_fence();
      if constexpr (kMode == kQkSs || kMode == kQkRs) {
#pragma unroll
        for (int db = 0; db < 9; ++db) {
#pragma unroll
          for (int ks = 0; ks < 4; ++ks) {
            const uint32_t step = (db * kBlock + ks * 32) >> 4;
            if constexpr (kMode == kQkSs) {
              wgmma_m64n64k16<T, 0>(d, a_desc + step, k_desc + step, 1);
            } else {
              wgmma_m64n64k16_rs<T, 0>(d, a_frag[ks], k_desc + step, 1);
            }
          }
        }
      } else if constexpr (kMode == kPvRs || kMode == kPvSs) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {  // four P V of 64 keys (4 k-steps each)
#pragma unroll
          for (int ks = 0; ks < 4; ++ks) {
            const uint64_t vb = v_desc + (((j % 2) * 4 * kBlock + ks * 16 * 128) >> 4);
            if constexpr (kMode == kPvRs) {
              wgmma_m64n256k16_rs<T, 1>(d, a_frag[ks], vb, 1);
            } else {
              wgmma_m64n256k16<T, 1>(d, a_desc + ((ks * 32) >> 4), vb, 1);
            }
          }
        }
      } else {
        // none: as long as a QK run would take at the tensor pipe's rate.
        const long long until = clock64() + 36 * 32;
        while (clock64() < until) {
        }
      }
      wgmma_commit();
      wgmma_wait<0>();
    }
    const long long t1 = clock64();
    float acc = 0.f;
#pragma unroll
    for (int i = 0; i < (kPv ? 128 : 32); ++i) acc += d[i];
    if (threadIdx.x == 0) {
      *done = 1;
      out[blockIdx.x].mma_clocks = t1 - t0;
      out[blockIdx.x].sink = acc;
    }
  } else if (wg == 1 && kCopy) {
    const int tid = threadIdx.x - 128;
    const uint32_t to = base + kOffCopy;
    long long bytes = 0;
    int v = (blockIdx.x * 4096 + tid) % src_vecs;
    const long long t0 = clock64();
    while (!*done) {
      // One batch: 32 KB (16 copies per thread), at most two in flight.
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const int slot = (i * 128 + tid) % (kCopyBytes / 16);
        cp_async_16(to + slot * 16, src + v, 16);
        v += 128;
        if (v >= src_vecs) v -= src_vecs;
      }
      cp_async_commit();
      cp_async_wait<1>();
      bytes += 16 * 16;
    }
    cp_async_wait<0>();
    const long long t1 = clock64();
    // Every thread copied `bytes`; thread 0 reports the warpgroup's total.
    if (tid == 0) {
      out[blockIdx.x].copy_clocks = t1 - t0;
      out[blockIdx.x].copy_bytes = bytes * 128;
    }
  }
}

template <int kMode, bool kCopy>
void run(const uint4* src, int src_vecs, int sms, Result* dev, std::vector<Result>& host) {
  auto kernel = rates<kMode, kCopy>;
  CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  for (int warm = 0; warm < 2; ++warm) {
    CHECK_CUDA(cudaMemset(dev, 0, sms * sizeof(Result)));
    kernel<<<sms, kThreads, kSmem>>>(src, src_vecs, dev);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaDeviceSynchronize());
  }
  CHECK_CUDA(cudaMemcpy(host.data(), dev, sms * sizeof(Result), cudaMemcpyDeviceToHost));
  double mma = 0, copy_bpc = 0;
  for (int b = 0; b < sms; ++b) {
    mma += host[b].mma_clocks;
    if (kCopy && host[b].copy_clocks > 0) copy_bpc += double(host[b].copy_bytes) / host[b].copy_clocks;
  }
  mma /= sms;
  const int per_run = kMode == kQkSs || kMode == kQkRs ? 36 : 16;
  const double clocks = mma / (kReps * double(per_run));
  // Shared-memory bytes the wgmma reads per instruction (A from smem: 2 KB; B:
  // 2 KB for n64, 8 KB for n256).
  const double smem_bytes = kMode == kQkSs ? 4096 : kMode == kQkRs ? 2048 : kMode == kPvRs ? 8192 : kMode == kPvSs ? 10240 : 0;
  std::printf("%-6s %-6s clocks/wgmma %7.2f  wgmma smem B/clk %6.1f  copy B/clk/SM %6.1f\n", kModeNames[kMode],
              kCopy ? "+copy" : "alone", kMode == kNone ? 0.0 : clocks,
              kMode == kNone ? 0.0 : smem_bytes / clocks, kCopy ? copy_bpc / sms : 0.0);
}

}  // namespace

int main() {
  int sms = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int src_vecs = (16 << 20) / 16;  // 16 MB: L2-resident after the first pass
  uint4* src = nullptr;
  Result* dev = nullptr;
  CHECK_CUDA(cudaMalloc(&src, src_vecs * sizeof(uint4)));
  CHECK_CUDA(cudaMemset(src, 0x3f, src_vecs * sizeof(uint4)));
  CHECK_CUDA(cudaMalloc(&dev, sms * sizeof(Result)));
  std::vector<Result> host(sms);
  std::printf("wgmma_smem_rates: %d SMs, %d runs per block, one block per SM\n", sms, kReps);
  run<kQkSs, false>(src, src_vecs, sms, dev, host);
  run<kQkRs, false>(src, src_vecs, sms, dev, host);
  run<kPvRs, false>(src, src_vecs, sms, dev, host);
  run<kPvSs, false>(src, src_vecs, sms, dev, host);
  run<kNone, true>(src, src_vecs, sms, dev, host);
  run<kQkSs, true>(src, src_vecs, sms, dev, host);
  run<kQkRs, true>(src, src_vecs, sms, dev, host);
  run<kPvRs, true>(src, src_vecs, sms, dev, host);
  run<kPvSs, true>(src, src_vecs, sms, dev, host);
  CHECK_CUDA(cudaFree(src));
  CHECK_CUDA(cudaFree(dev));
  return 0;
}
