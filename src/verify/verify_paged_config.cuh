// Per-arch tile configurations of the split-K verify kernel (one place, after
// FlashMLA's config.h / ThunderKittens' tile-dims traits).
//
// A block owns kBlockM query rows of one request (row r = token * H + head)
// and streams the request's keys kBlockN at a time. Warps, kGroupWarps to a
// row group of 32 rows:
//   - every warp computes S for 32 rows x kQkN keys over its part of the 576
//     dims (kGroupWarps / kKeySlices parts per key slice);
//   - each warp then sums the parts of 32 / kDimParts of its slice's rows
//     (a reduce-scatter through shared memory where kDimParts > 1), applies
//     scale and mask to them, and runs their online softmax;
//   - every warp accumulates O for 32 rows x kODims latent dims.
// Shared memory: the Q tile (or, with kQInRegisters, Q staged once in the
// last KV stage and then held as mma fragments), kStages KV tiles (a
// cp.async ring), P, the partial S.
#pragma once

#include <cstddef>
#include <type_traits>

#include "verify/verify_paged_args.cuh"

namespace kdtree::verify {

enum class TileConfigId { kLarge = 0, kMedium = 1, kSmall = 2 };

template <int BlockM, int BlockN, int QkN, bool TwoQkChains, int BlocksPerSm = 1, int Stages = 2,
          int GroupWarps = 4, bool QInRegisters = false>
struct TileConfig {
  static constexpr int kBlockM = BlockM;
  // Blocks resident per SM (launch bounds; the split heuristic fills them).
  static constexpr int kBlocksPerSm = BlocksPerSm;
  // QK accumulates even and odd k-steps separately (two mma chains of 18).
  // Off everywhere: measured 9% slower on the H200 (docs/perf_notes.md v3);
  // the QK loop is not bound by the mma chain latency.
  static constexpr bool kTwoQkChains = TwoQkChains;
  static constexpr int kBlockN = BlockN;
  static constexpr int kQkN = QkN;
  // KV tiles in the cp.async ring: kStages - 1 in flight while one computes.
  static constexpr int kStages = Stages;
  static constexpr int kRowGroups = kBlockM / 32;
  static constexpr int kKeySlices = kBlockN / kQkN;
  // A row group's warps split O's 512 dims, kODims each, ...
  static constexpr int kGroupWarps = GroupWarps;
  static constexpr int kODims = kLatentDim / kGroupWarps;
  // ... and each tile's QK: kKeySlices slices of kQkN keys, and each slice's
  // 576 dims in kDimParts parts, so every warp runs QK even where the tile
  // has fewer key slices than warps (the medium and small configs). The
  // parts' partial S meet through shared memory, where each warp sums, and
  // runs the softmax of, 4 / kDimParts of the row group's four row pairs
  // (8 rows each).
  static constexpr int kDimParts = kGroupWarps / kKeySlices;
  static constexpr int kWarps = kRowGroups * kGroupWarps;
  // Q as mma A fragments in registers, each warp its dims part's (32 rows x
  // 576 / kDimParts dims), read once from a staging copy in the last KV
  // stage: no Q tile in shared memory, and the QK reads only K from it.
  static constexpr bool kQInRegisters = QInRegisters;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kPStride = kBlockN + 8;  // elements; pad keeps ldmatrix conflict-free

  // Shared memory layout, bytes.
  static constexpr size_t kRowBytes = kHeadDim * 2;
  static constexpr size_t kQBytes = kBlockM * kRowBytes;
  static constexpr size_t kKvStageBytes = kBlockN * kRowBytes;
  static constexpr size_t kPBytes = size_t(kBlockM) * kPStride * 2;
  static constexpr size_t kOffKv = kQInRegisters ? 0 : kQBytes;
  static constexpr size_t kOffP = kOffKv + kStages * kKvStageBytes;
  // Row maxima per key slice during the loop; the same space holds the fp32
  // row sums per key slice in the epilogue (the last max is read before the
  // last P V, the sums written after it).
  static constexpr size_t kOffRedMax = kOffP + kPBytes;  // [kKeySlices][kBlockM] f32
  static constexpr size_t kOffRedSum = kOffRedMax;
  static constexpr size_t kOffAlpha = kOffRedMax + kKeySlices * kBlockM * 4;  // [kBlockM] f32
  static constexpr size_t kOffRowMax = kOffAlpha + kBlockM * 4;            // [kBlockM] f32
  static constexpr size_t kOffRowWeight = kOffRowMax + kBlockM * 4;        // [kBlockM] f32
  static constexpr size_t kOffBadKey = kOffRowWeight + kBlockM * 4;        // [kStages][kBlockN] u8
  // Partial S on their way to the warp that owns their rows: per (row group,
  // key slice, row pair of 8 rows) the other kDimParts - 1 parts' 8 x kQkN
  // f32, as [part][n8 tile] float2s interleaved by lane.
  static constexpr size_t kOffQkPartial = (kOffBadKey + kStages * kBlockN + 15) / 16 * 16;
  static constexpr size_t kQkPartialBytes = size_t(kRowGroups) * kKeySlices * 4 * (kDimParts - 1) * 8 * kQkN * 4;
  static constexpr size_t kSmemBytes = kOffQkPartial + kQkPartialBytes;

  static_assert(kBlockM % 32 == 0 && kBlockN % kQkN == 0 && kQkN % 16 == 0, "tile shape");
  static_assert(kStages >= 2 && kStages <= 32, "a ring of stages, one pending bit each");
  static_assert(kGroupWarps == 4 || kGroupWarps == 8, "O's 512 dims in 4 or 8 warps' parts");
  static_assert(kKeySlices <= kGroupWarps && kGroupWarps % kKeySlices == 0,
                "a row group's warps cover its key slices");
  static_assert(!kQInRegisters || (kQBytes <= kKvStageBytes && kHeadDim / 16 / kDimParts <= 9),
                "Q staged in one KV stage; at most 72 fragment registers a thread");
  static_assert((kHeadDim / 16) % kDimParts == 0, "whole k-steps per dims part");
  static_assert(4 % kDimParts == 0, "a slice's four row pairs shared evenly among its dims parts");
  static_assert(kBlockN % (kThreads / 8) == 0 && kBlockM % (kThreads / 8) == 0,
                "the KV / Q loaders cover the tile in whole passes of 8 threads per row");
};

// sm_90 (227 KB opt-in): 64 rows x 64 keys, one block per SM; QK on all 8
// warps (16 keys each: measured 1.35x faster than 4 QK warps of 32 keys,
// docs/perf_notes.md). The KDTREE_LARGE_* switches select variants to measure.
#ifndef KDTREE_LARGE_BLOCK_M
#define KDTREE_LARGE_BLOCK_M 64
#endif
#ifndef KDTREE_LARGE_BLOCK_N
#define KDTREE_LARGE_BLOCK_N 64
#endif
#ifndef KDTREE_LARGE_BLOCKS_PER_SM
#define KDTREE_LARGE_BLOCKS_PER_SM 1
#endif
#ifndef KDTREE_LARGE_QK_KEYS
#define KDTREE_LARGE_QK_KEYS 16
#endif
#ifndef KDTREE_LARGE_TWO_QK_CHAINS
#define KDTREE_LARGE_TWO_QK_CHAINS 0
#endif
using LargeConfig = TileConfig<KDTREE_LARGE_BLOCK_M, KDTREE_LARGE_BLOCK_N, KDTREE_LARGE_QK_KEYS,
                               KDTREE_LARGE_TWO_QK_CHAINS, KDTREE_LARGE_BLOCKS_PER_SM>;
// sm_80 (163 KB opt-in): 64 rows x 32 keys.
using MediumConfig = TileConfig<64, 32, 16, false>;
// sm_86 / sm_89 / sm_120 (99 KB opt-in): 32 rows x 32 keys, 8 warps (64 O
// dims and a quarter of a 16-key slice's QK each), Q in registers so that two
// 32-key stages fit (docs/perf_notes.md, session 52).
using SmallConfig = TileConfig<32, 32, 16, false, 1, 2, 8, true>;

static_assert(LargeConfig::kSmemBytes <= 232448 &&
                  LargeConfig::kBlocksPerSm * (LargeConfig::kSmemBytes + 1024) <= 233472,
              "sm_90 opt-in shared memory");
static_assert(MediumConfig::kSmemBytes <= 166912, "sm_80 opt-in shared memory");
static_assert(SmallConfig::kSmemBytes <= 101376, "sm_86/89/120 opt-in shared memory");

// Which device archs (__CUDA_ARCH__) carry a real body of each config's
// kernel; elsewhere it compiles to an empty stub, keeping the fat binary and
// the build small. KDTREE_FORCE_SM120_CONFIG runs the small config on sm_90.
#ifndef KDTREE_FORCE_SM120_CONFIG
#define KDTREE_FORCE_SM120_CONFIG 0
#endif

// fp8 KV runs the small config on every arch but sm_90a (the wgmma kernels
// there, when built as sm_90a): its convert-on-load holds a tile's
// raw bytes in registers from the tile's top to its end (18 a thread), which
// the large and medium configs' registers do not hold without spilling. With
// KDTREE_SM90A, sm_90 (built as sm_90a) runs verify_paged_sm90a.cu instead of
// the large config.
#ifndef KDTREE_SM90A
#define KDTREE_SM90A 0
#endif
template <class Cfg, bool kKvFp8>
__host__ __device__ constexpr bool config_built_for(int arch) {
  if constexpr (std::is_same<Cfg, LargeConfig>::value) {
    return !kKvFp8 && arch >= 900 && arch < 1200 && !(arch == 900 && KDTREE_SM90A) && !KDTREE_FORCE_SM120_CONFIG;
  } else if constexpr (std::is_same<Cfg, MediumConfig>::value) {
    return !kKvFp8 && arch == 800 && !KDTREE_FORCE_SM120_CONFIG;
  } else {
    return kKvFp8 || (arch >= 860 && arch < 900) || arch >= 1200 || KDTREE_FORCE_SM120_CONFIG;
  }
}

// The config the host launches on a device that runs this library's kernel
// image for arch `image_arch` (DeviceInfo::image_arch): the one whose body
// config_built_for put in that image. Not the device's own compute
// capability: a build without it runs another arch's image there (an sm_80
// cubin on sm_86, compute_89 PTX on sm_90), whose other configs are empty.
// (With KDTREE_SM90A, 900's 16-bit KV runs verify_paged_sm90a.cu instead,
// and the large config it is given here goes unused.)
inline TileConfigId config_for_image(int image_arch, bool kv_fp8) {
  if (kv_fp8 || config_built_for<SmallConfig, false>(image_arch)) return TileConfigId::kSmall;
  if (config_built_for<MediumConfig, false>(image_arch)) return TileConfigId::kMedium;
  return TileConfigId::kLarge;
}

}  // namespace kdtree::verify
