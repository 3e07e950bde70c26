// wgmma_smem_rates.cu - what the sm_90a verify kernels' warpgroup MMAs cost
// against shared memory, alone and beside a stream of cp.async copies into
// shared memory (the gather's refills). One block per SM, 256 threads:
//   warpgroup 0 issues a long run of one wgmma shape and times it (clock64):
//     qk_ss   m64n64k16, A and B from shared memory (the QK, Q and K in smem)
//     qk_rs   m64n64k16, A from registers (Q's fragments), B from smem
//     qk16_ss m64n16k16, A and B from shared memory (a short tile's QK)
//     pv_rs   m64n256k16, A from registers (P), B from smem read MN-major (V)
//     pv_ss   m64n256k16, A and B from smem (the other warpgroup's P)
//     none    no wgmma (the copy stream's own rate)
//   warpgroup 1 streams copies of an L2-resident pool of 1152-byte rows
//     (random rows, 128-byte pieces: the gather's) into a 64 KB smem region,
//     batches in flight, until warpgroup 0 is done, and reports its
//     bytes per clock (16 KB batches, four in flight). Copy engines:
//       cp.async  16-byte cp.async.cg per thread (the verify kernels' gather)
//       bulk      128-byte cp.async.bulk (1D, unswizzled), mbarrier tx count
//       tma       cp.async.bulk.tensor.2d, box 64 x 1 row, 128-byte swizzle,
//                 each row's block landing at its row of a [64][128 B] atom
//   Then a layout check: the tma copy of 64 rows into one atom must put
//   chunk c of row r at chunk (c ^ r) & 7, as wgmma reads it.
// The operands are the kernels' 128-byte-swizzled [64 rows][128 B] blocks.
// Shared memory moves 128 B per clock per SM; qk_ss asks 4 KB per wgmma
// (A 2 KB + B 2 KB), so at the tensor pipe's m64n64k16 rate (32 clocks) it
// alone would use all of it.
//
// Build: nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -I../src
//          -o wgmma_smem_rates wgmma_smem_rates.cu
// Run:   ./wgmma_smem_rates        (every mode, one line each)
#include "common/mbarrier.cuh"
#include "common/mma.cuh"
#include "common/wgmma.cuh"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
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

enum Mode : int { kQkSs = 0, kQkRs, kQk16Ss, kPvRs, kPvSs, kNone };
const char* const kModeNames[] = {"qk_ss", "qk_rs", "qk16_ss", "pv_rs", "pv_ss", "none"};
// A QK mode: a run is 36 wgmma over Q's nine column blocks (else 16 P V steps).
__host__ __device__ constexpr bool is_qk(int mode) { return mode == kQkSs || mode == kQkRs || mode == kQk16Ss; }
enum Copy : int { kNoCopy = 0, kCpAsync, kBulk, kTma };
const char* const kCopyNames[] = {"alone", "cp.async", "bulk", "tma"};
constexpr int kRowBytes = 1152;  // one bf16 KV row of 576
constexpr int kPoolRows = 16384;  // 18 MB: L2-resident

constexpr int kThreads = 256;  // 255 registers each: no wgmma serialized for want of them
constexpr int kBlock = 8192;              // one [64][128 B] column block
constexpr int kOffA = 0;                  // 9 blocks: Q (A operand)
constexpr int kOffB = 9 * kBlock;         // 9 blocks: K / V (B operand)
constexpr int kOffCopy = 18 * kBlock;     // 64 KB: the copy stream's target
constexpr int kCopyBytes = 64 * 1024;
constexpr int kOffFlag = kOffCopy + kCopyBytes;  // done flag, then kInFlight mbarriers from +8
constexpr int kInFlight = 4;                      // copy batches in flight
constexpr int kSmem = kOffFlag + 1024 + 1024;  // + flag, + alignment slack
constexpr int kReps = 256;                // timed runs of 36 (QK) or 16 (P V) wgmmas

struct Result {
  long long mma_clocks;   // warpgroup 0, kReps runs
  long long copy_clocks;  // warpgroup 1
  long long copy_bytes;
  float sink;
};

__device__ __forceinline__ uint32_t pool_row(uint32_t i) { return (i * 2654435761u >> 7) % kPoolRows; }

// mbarrier_wait with a bound: false if the phase has not completed after
// ~4M polls (copies the hardware refused would otherwise hang the probe).
// (Device pass only, as mbarrier.cuh: its callers' bodies are too.)
#if defined(__CUDA_ARCH__)
__device__ __forceinline__ bool bounded_wait(uint32_t barrier, uint32_t parity) {
  for (int spin = 0; spin < (1 << 22); ++spin) {
    if (mbarrier_try_wait(barrier, parity)) return true;
  }
  return false;
}
#endif

__device__ __forceinline__ void tma_row_block(uint32_t dst, const CUtensorMap* map, int x, int y, uint32_t barrier) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          dst),
      "l"(map), "r"(x), "r"(y), "r"(barrier)
      : "memory");
}

// Warpgroup 1's stream until *done: 16 KB batches of 128 random 128-byte row
// pieces (cp.async: 8 threads per piece; bulk, tma: one thread per piece), at
// most kInFlight batches in flight.
template <int kCopy>
__device__ void copy_stream(const unsigned char* pool, const CUtensorMap* map, unsigned char* smem, Result* out) {
#if defined(__CUDA_ARCH__)
  const int tid = threadIdx.x - 128;
  const uint32_t base = smem_addr(smem);
  const uint32_t to = base + kOffCopy;
  volatile int* done = reinterpret_cast<volatile int*>(smem + kOffFlag);
  const auto bar = [&](int k) { return base + kOffFlag + 8 + 8 * (k % kInFlight); };
  constexpr int kBatch = 16 * 1024, kPieces = kBatch / 128 / 128;  // 128-byte pieces per thread and batch
  long long batches = 0;
  bool lost = false;  // a batch never landed
  uint32_t next = blockIdx.x * 7919u + tid;
  const long long t0 = clock64();
  for (int k = 0;; ++k) {
    // Stop together: the warps' reads of the flag can differ, their OR not.
    uint32_t stop;
    asm volatile(
        "{\n.reg .pred p, q;\nsetp.ne.u32 q, %1, 0;\nbar.red.or.pred p, 1, 128, q;\nselp.u32 %0, 1, 0, p;\n}"
        : "=r"(stop)
        : "r"(static_cast<uint32_t>(*done))
        : "memory");
    if (stop) break;
    if constexpr (kCopy == kCpAsync) {
#pragma unroll
      for (int pass = 0; pass < kBatch / 16 / 128; ++pass) {  // 8 threads per 128-byte piece, 16 B each
        const uint32_t piece = pass * 16 + tid / 8, chunk = tid % 8;
        const uint32_t row = pool_row(next + piece), blk = piece % 9;
        cp_async_16(to + (piece % 512) * 128 + chunk * 16, pool + size_t(row) * kRowBytes + blk * 128 + chunk * 16, 16);
      }
      cp_async_commit();
      cp_async_wait<kInFlight - 1>();
    } else {
      // The phase needs this arrival, so copies that land first cannot complete it.
      if (tid == 0) mbarrier_arrive_expect_tx(bar(k), kBatch);
#pragma unroll
      for (int i = 0; i < kPieces; ++i) {
        const uint32_t piece = i * 128 + tid;
        const uint32_t row = pool_row(next + piece), blk = piece % 9;
        const uint32_t dst = to + (piece % 512) * 128;
        if constexpr (kCopy == kBulk) {
          bulk_copy_to_shared(dst, pool + size_t(row) * kRowBytes + blk * 128, 128, bar(k));
        } else {
          tma_row_block(dst, map, blk * 64, row, bar(k));
        }
      }
      // Batch k - (kInFlight - 1) has landed: at most kInFlight in flight.
      const int old = k - (kInFlight - 1);
      if (old >= 0 && !bounded_wait(bar(old), (old / kInFlight) & 1)) lost = true;
    }
    next += 256;
    ++batches;
  }
  if constexpr (kCopy == kCpAsync) {
    cp_async_wait<0>();
  } else {
    for (int k = static_cast<int>(batches) - (kInFlight - 1); k < batches; ++k) {
      if (k >= 0 && !bounded_wait(bar(k), (k / kInFlight) & 1)) lost = true;
    }
  }
  const long long t1 = clock64();
  if (tid == 0) {
    out[blockIdx.x].copy_clocks = t1 - t0;
    out[blockIdx.x].copy_bytes = lost ? -1 : batches * kBatch;
  }
#endif
}

template <int kMode, int kCopy>
__global__ void __launch_bounds__(kThreads, 1)
    rates(const unsigned char* pool, const __grid_constant__ CUtensorMap map, Result* out) {
#if defined(__CUDA_ARCH__)
  extern __shared__ __align__(1024) unsigned char raw[];
  unsigned char* smem = raw + ((1024 - (smem_addr(raw) & 1023)) & 1023);
  const uint32_t base = smem_addr(smem);
  volatile int* done = reinterpret_cast<volatile int*>(smem + kOffFlag);
  // Operands: small finite bf16 values (1 + a few mantissa bits, alternating sign).
  for (int i = threadIdx.x; i < 18 * kBlock / 4; i += kThreads) {
    reinterpret_cast<uint32_t*>(smem)[i] = 0x3f80bf80u ^ ((i * 2654435761u) & 0x007f007fu);
  }
  if (threadIdx.x == 0) {
    *done = 0;
    for (int k = 0; k < kInFlight; ++k) mbarrier_init(base + kOffFlag + 8 + 8 * k, 1);
    mbarrier_init_fence();
  }
  fence_proxy_async_smem();
  __syncthreads();
  const int wg = threadIdx.x / 128;

  if (wg == 0) {
    constexpr bool kPv = kMode == kPvRs || kMode == kPvSs;
    constexpr int kAcc = kPv ? 128 : kMode == kQk16Ss ? 8 : 32;
    float d[kAcc];  // the mode's accumulator: P V's m64n256, the QK's m64n64 or m64n16
#pragma unroll
    for (int i = 0; i < kAcc; ++i) d[i] = 0.f;
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
      if constexpr (is_qk(kMode)) {
#pragma unroll
        for (int db = 0; db < 9; ++db) {
#pragma unroll
          for (int ks = 0; ks < 4; ++ks) {
            const uint32_t step = (db * kBlock + ks * 32) >> 4;
            if constexpr (kMode == kQkSs) {
              wgmma_m64n64k16<T, 0>(d, a_desc + step, k_desc + step, 1);
            } else if constexpr (kMode == kQk16Ss) {
              wgmma_m64n16k16<T, 0>(d, a_desc + step, k_desc + step, 1);
            } else {
              wgmma_m64n64k16_rs<T, 0>(d, a_frag[ks], k_desc + step, 1);
            }
          }
        }
      } else if constexpr (kPv) {
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
    for (int i = 0; i < kAcc; ++i) acc += d[i];
    if (threadIdx.x == 0) {
      *done = 1;
      out[blockIdx.x].mma_clocks = t1 - t0;
      out[blockIdx.x].sink = acc;
    }
  } else if (kCopy != kNoCopy) {
    copy_stream<kCopy>(pool, &map, smem, out);
  }
#endif
}

// The tma copy's layout: rows 0..63 of the pool's column block `blk` into one
// [64][128 B] atom, one box per row at the row's 128-byte offset; counts the
// 16-byte chunks not where the 128-byte swizzle puts them.
__global__ void tma_layout_check(const unsigned char* pool, const __grid_constant__ CUtensorMap map, int blk,
                                 int* mismatches) {
#if defined(__CUDA_ARCH__)
  __shared__ __align__(1024) unsigned char atom[kBlock];
  __shared__ __align__(8) uint64_t bar;
  const uint32_t b = smem_addr(&bar);
  if (threadIdx.x == 0) {
    mbarrier_init(b, 1);
    mbarrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    mbarrier_arrive_expect_tx(b, kBlock);
    for (int r = 0; r < 64; ++r) tma_row_block(smem_addr(atom) + r * 128, &map, blk * 64, 3 * r + 1, b);
  }
  if (!bounded_wait(b, 0)) {
    if (threadIdx.x == 0) atomicExch(mismatches, -1);
    return;
  }
  int bad = 0;
  for (int i = threadIdx.x; i < 64 * 8; i += blockDim.x) {
    const int r = i / 8, c = i % 8;
    const unsigned char* want = pool + size_t(3 * r + 1) * kRowBytes + blk * 128 + c * 16;
    const unsigned char* got = atom + r * 128 + (((c ^ r) & 7) << 4);
    for (int j = 0; j < 16; ++j) bad += want[j] != got[j];
  }
  atomicAdd(mismatches, bad);
#endif
}

template <int kMode, int kCopy>
void run(const unsigned char* pool, const CUtensorMap& map, int sms, Result* dev, std::vector<Result>& host) {
  auto kernel = rates<kMode, kCopy>;
  CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  for (int warm = 0; warm < 2; ++warm) {
    CHECK_CUDA(cudaMemset(dev, 0, sms * sizeof(Result)));
    kernel<<<sms, kThreads, kSmem>>>(pool, map, dev);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaDeviceSynchronize());
  }
  CHECK_CUDA(cudaMemcpy(host.data(), dev, sms * sizeof(Result), cudaMemcpyDeviceToHost));
  double mma = 0, copy_bpc = 0;
  for (int b = 0; b < sms; ++b) {
    mma += host[b].mma_clocks;
    if (host[b].copy_bytes < 0) {
      std::printf("%-7s %-8s a copy batch never landed (block %d)\n", kModeNames[kMode], kCopyNames[kCopy], b);
      return;
    }
    if (host[b].copy_clocks > 0) copy_bpc += double(host[b].copy_bytes) / host[b].copy_clocks;
  }
  mma /= sms;
  const int per_run = is_qk(kMode) ? 36 : 16;
  const double clocks = mma / (kReps * double(per_run));
  // Shared-memory bytes the wgmma reads per instruction (A from smem: 2 KB; B:
  // 2 KB for n64, 512 B for n16, 8 KB for n256).
  const double smem_bytes = kMode == kQkSs     ? 4096
                            : kMode == kQkRs   ? 2048
                            : kMode == kQk16Ss ? 2560
                            : kMode == kPvRs   ? 8192
                            : kMode == kPvSs   ? 10240
                                               : 0;
  std::printf("%-7s %-8s clocks/wgmma %7.2f  wgmma smem B/clk %6.1f  copy B/clk/SM %6.1f\n", kModeNames[kMode],
              kCopyNames[kCopy], kMode == kNone ? 0.0 : clocks, kMode == kNone ? 0.0 : smem_bytes / clocks,
              copy_bpc / sms);
}

template <int kCopy>
void run_all(const unsigned char* pool, const CUtensorMap& map, int sms, Result* dev, std::vector<Result>& host) {
  if constexpr (kCopy != kNoCopy) run<kNone, kCopy>(pool, map, sms, dev, host);
  run<kQkSs, kCopy>(pool, map, sms, dev, host);
  run<kQkRs, kCopy>(pool, map, sms, dev, host);
  run<kQk16Ss, kCopy>(pool, map, sms, dev, host);
  run<kPvRs, kCopy>(pool, map, sms, dev, host);
  run<kPvSs, kCopy>(pool, map, sms, dev, host);
}

}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IONBF, 0);  // each line out as it is printed
  int sms = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  unsigned char* pool = nullptr;
  Result* dev = nullptr;
  int* mismatches = nullptr;
  const size_t pool_bytes = size_t(kPoolRows) * kRowBytes;
  CHECK_CUDA(cudaMalloc(&pool, pool_bytes));
  std::vector<unsigned char> init(pool_bytes);
  for (size_t i = 0; i < pool_bytes; ++i) init[i] = static_cast<unsigned char>((i * 2654435761u) >> 13);
  for (size_t i = 1; i < pool_bytes; i += 2) init[i] = 0x3f;  // bf16 values near 1 (high bytes)
  CHECK_CUDA(cudaMemcpy(pool, init.data(), pool_bytes, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMalloc(&dev, sms * sizeof(Result)));
  CHECK_CUDA(cudaMalloc(&mismatches, sizeof(int)));

  // The pool as a 2D tensor of bf16 [kPoolRows][576], boxes of 64 x 1.
  PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  cudaDriverEntryPointQueryResult query;
  CHECK_CUDA(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", reinterpret_cast<void**>(&encode), 12000,
                                              cudaEnableDefault, &query));
  if (encode == nullptr || query != cudaDriverEntryPointSuccess) {
    std::fprintf(stderr, "wgmma_smem_rates: no cuTensorMapEncodeTiled\n");
    return 1;
  }
  CUtensorMap map;
  const cuuint64_t dims[2] = {576, kPoolRows};
  const cuuint64_t strides[1] = {kRowBytes};
  const cuuint32_t box[2] = {64, 1};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult made = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, pool, dims, strides, box, elem_strides,
                               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (made != CUDA_SUCCESS) {
    std::fprintf(stderr, "wgmma_smem_rates: cuTensorMapEncodeTiled failed (%d)\n", static_cast<int>(made));
    return 1;
  }
  std::vector<Result> host(sms);
  std::printf("wgmma_smem_rates: %d SMs, %d runs per block, one block per SM\n", sms, kReps);
  run_all<kNoCopy>(pool, map, sms, dev, host);
  run_all<kCpAsync>(pool, map, sms, dev, host);
  run_all<kBulk>(pool, map, sms, dev, host);
  run_all<kTma>(pool, map, sms, dev, host);
  for (int blk = 0; blk < 9; blk += 4) {
    CHECK_CUDA(cudaMemset(mismatches, 0, sizeof(int)));
    tma_layout_check<<<1, 128>>>(pool, map, blk, mismatches);
    CHECK_CUDA(cudaGetLastError());
    int bad = -1;
    CHECK_CUDA(cudaMemcpy(&bad, mismatches, sizeof(int), cudaMemcpyDeviceToHost));
    std::printf("tma layout check, column block %d: %s\n", blk,
                bad < 0 ? "the boxes never landed" : (std::to_string(bad) + " bytes misplaced of 8192").c_str());
  }

  CHECK_CUDA(cudaFree(pool));
  CHECK_CUDA(cudaFree(dev));
  CHECK_CUDA(cudaFree(mismatches));
  return 0;
}
