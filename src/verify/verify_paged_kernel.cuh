// Split-K tree-verify attention over a paged MLA KV cache (mma.sync + cp.async).
//
// Grid (m_tiles, num_splits, batch): block (m, s, b) takes query rows
// [m*kBlockM, (m+1)*kBlockM) of request b (row = token * H + head, so every
// head and draft token of the request shares each KV tile) and the keys of
// split s. Blocks of one (s, b) are adjacent in launch order, so when a request
// has more rows than one block they stream the same KV rows at the same time
// and L2 serves all but the first read.
//
// Per KV tile of kBlockN keys (gathered through slot ids with cp.async into a
// ring of kStages swizzled buffers, kStages - 1 tiles ahead of the one computing;
// fp8 KV, which runs the small config, is loaded into registers at the top of
// the tile before and stored converted to T after that tile's P V):
//   1. S = Q K^T for 32 rows x kQkN keys (a key slice) over all 576 dims,
//      one warp a slice; where a row group has more warps than slices (the
//      medium and small configs) each of a slice's warps takes a part of the
//      576 dims, and the parts' partial S meet by a reduce-scatter through
//      shared memory: each warp sums the parts of 32 / kDimParts of the rows.
//      Q comes from its shared-memory tile, or (the small config) from
//      registers loaded once. Scaled to base 2; the mask runs only on tiles
//      that hold tail keys, a split end or an out-of-range slot.
//   2. Each warp, on its rows of its slice: online softmax (running max m,
//      fp32 partial row sums l for the lse), P (bf16 / f16) and the rescale
//      factor alpha to shared memory.
//      The reference max moves only when a row's max grows by more than
//      2^kRescaleLog2 (P then stays <= 2^8, safe in bf16 / f16 and fp32), so
//      after the first tiles O is almost never rescaled. So P is computed
//      against the running max first, and the row maxima are exchanged and
//      P redone only when the row group's barrier votes that some score
//      passed it by that margin.
//   3. All warps: O[32 rows x kODims] = alpha * O + P V, V being the first
//      512 dims of the same KV tile (ldmatrix.trans). The warps holding dims
//      0..kODims-1 also multiply P by a column of ones: O is normalized by the sum
//      of the rounded P from the same tensor-core accumulation, so all-ones
//      values give exactly 1.
// Epilogue: O / l and lse straight to the output when num_splits == 1, else
// normalized partial states to the workspace for verify_paged_merge.
//
// Designed against: H <= 128, q_len <= 128, D = 576 / D_L = 512, prefixes up
// to 2^31 keys per request, 64-bit slot offsets.
#pragma once

#include <cuda_fp8.h>

#include <cmath>
#include <type_traits>
#include <utility>

#include "common/grid_dependency.cuh"
#include "common/mma.cuh"
#include "verify/verify_paged_args.cuh"
#include "verify/verify_paged_config.cuh"

namespace kdtree::verify {

constexpr int kChunks = kHeadDim * 2 / 16;  // 16-byte chunks per 576-dim row (72)

// Byte offset of 16-byte chunk `chunk` of row `row` in a swizzled [rows][576]
// tile: the low three chunk bits are XORed with the row, so the 8 rows one
// ldmatrix reads at a fixed chunk land in 8 different bank groups.
__device__ __forceinline__ uint32_t swizzle(int row, int chunk) {
  return static_cast<uint32_t>(row * (kHeadDim * 2) + (((chunk & ~7) | ((chunk ^ row) & 7)) << 4));
}

// fp8 e4m3 -> 8 values of T (bf16 / f16), exactly (e4m3 is a subset of both);
// the kv_scale is applied to the fp32 logits and outputs instead.
template <class T>
__device__ __forceinline__ uint4 fp8x8_to(uint2 raw) {
  const uint32_t words[2] = {raw.x, raw.y};
  uint32_t out[4];
#pragma unroll
  for (int w = 0; w < 2; ++w) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      __half2_raw h2 = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(words[w] >> (16 * h)), __NV_E4M3);
      const float2 f = __half22float2(*reinterpret_cast<__half2*>(&h2));
      out[w * 2 + h] = pack2<T>(f.x, f.y);
    }
  }
  return make_uint4(out[0], out[1], out[2], out[3]);
}

template <class Cfg, class T, bool kKvFp8>
struct VerifyBlock {
  static constexpr int kBlockM = Cfg::kBlockM;
  static constexpr int kBlockN = Cfg::kBlockN;
  static constexpr int kQkN = Cfg::kQkN;
  static constexpr int kQkTiles = kQkN / 8;  // n8 tiles per QK warp
  using KvElem = typename std::conditional<kKvFp8, uint8_t, T>::type;

  const PagedArgs& a;
  unsigned char* smem;
  Request req;
  int rows;       // q_len * H
  int row0;       // first block row
  int64_t key_begin, key_end;

  __device__ VerifyBlock(const PagedArgs& args, unsigned char* s, const Request& r, int m_tile)
      : a(args), smem(s), req(r), rows(r.q_len * args.num_heads), row0(m_tile * kBlockM) {}

  __device__ uint32_t kv_tile(int stage) const {
    return smem_addr(smem + Cfg::kOffKv + stage * Cfg::kKvStageBytes);
  }
  __device__ uint8_t* bad_key(int stage) const { return smem + Cfg::kOffBadKey + stage * kBlockN; }
  __device__ float* red_max() const { return reinterpret_cast<float*>(smem + Cfg::kOffRedMax); }
  __device__ float* red_sum() const { return reinterpret_cast<float*>(smem + Cfg::kOffRedSum); }
  __device__ float* row_weight() const { return reinterpret_cast<float*>(smem + Cfg::kOffRowWeight); }
  __device__ float* alpha() const { return reinterpret_cast<float*>(smem + Cfg::kOffAlpha); }
  __device__ float* row_max() const { return reinterpret_cast<float*>(smem + Cfg::kOffRowMax); }
  __device__ T* p_tile() const { return reinterpret_cast<T*>(smem + Cfg::kOffP); }

  // Q rows of this block into the swizzled Q tile (with kQInRegisters, the
  // last KV stage, read into registers before that stage's first gather);
  // rows past the request are zero.
  __device__ uint32_t q_tile() const {
    return Cfg::kQInRegisters ? kv_tile(Cfg::kStages - 1) : smem_addr(smem);
  }
  __device__ void load_q() const {
    constexpr int kRowsPerPass = Cfg::kThreads / 8;
    const int lane8 = threadIdx.x % 8;
#pragma unroll
    for (int pass = 0; pass < kBlockM / kRowsPerPass; ++pass) {
      const int r_local = pass * kRowsPerPass + threadIdx.x / 8;
      const int r = row0 + r_local;
      bool ok;
      const T* src = q_row<T>(a, req, rows, r, &ok);
#pragma unroll
      for (int u = 0; u < kChunks / 8; ++u) {
        const int c = lane8 + 8 * u;
        cp_async_16(q_tile() + swizzle(r_local, c), ok ? src + c * 8 : src, ok ? 16 : 0);
      }
    }
  }

  // Chunks lane8 + 8u (u in kU...) of a row: each 128 u bytes after chunk
  // lane8 in the row and in the swizzled tile (the swizzle keeps a chunk's
  // bits above the low three), so each copy carries its offsets.
  template <int... kU>
  __device__ __forceinline__ static void copy_row_chunks(uint32_t to, const char* from, int src_bytes,
                                                         std::integer_sequence<int, kU...>) {
    (cp_async_16<kU * 128, kU * 128>(to, from, src_bytes), ...);
  }

  // The KV gather's threads: kThreadsPerKey a key, kKeysPerPass keys a pass.
  static constexpr int kThreadsPerKey = 8;
  static constexpr int kKeysPerPass = Cfg::kThreads / kThreadsPerKey;
  static constexpr int kKvPasses = kBlockN / kKeysPerPass;  // whole passes: TileConfig asserts it
  using KvIds = int64_t[kKvPasses];

  // This thread's raw slot ids for the KV tile starting at key k0, by
  // predicated loads that stay in flight until load_kv reads them: the loop
  // fetches them a tile before their gather, off the tile's critical path.
  __device__ void kv_slot_ids(int64_t k0, KvIds& id) const {
    int64_t kk[kKvPasses];
#pragma unroll
    for (int pass = 0; pass < kKvPasses; ++pass) kk[pass] = k0 + pass * kKeysPerPass + threadIdx.x / kThreadsPerKey;
    key_slot_ids(a, req, key_end, kk, id);
  }

  // Issues the loads of the KV tile starting at key k0 into `stage`, given
  // kv_slot_ids(k0); returns whether one of this thread's keys had an
  // out-of-range slot.
  __device__ bool load_kv(int64_t k0, int stage, const KvIds& id) const {
    bool any_bad = false;
    if constexpr (!kKvFp8) {
      const int lane8 = threadIdx.x % 8;
#pragma unroll
      for (int pass = 0; pass < kKvPasses; ++pass) {
        const int key = pass * kKeysPerPass + threadIdx.x / 8;
        bool bad;
        const T* src = key_row<T>(a, req, key_end, k0 + key, id[pass], lane8 == 0, &bad);
        if (lane8 == 0) bad_key(stage)[key] = bad;
        any_bad |= bad;
        // Chunks lane8 + 8u. A key that must not be read is zero-filled: 0
        // source bytes, the address (kv_cache) never dereferenced.
        const int src_bytes = src != nullptr ? 16 : 0;
        const char* from =
            reinterpret_cast<const char*>(src != nullptr ? src : static_cast<const T*>(a.kv_cache)) + lane8 * 16;
        copy_row_chunks(kv_tile(stage) + swizzle(key, lane8), from, src_bytes,
                        std::make_integer_sequence<int, kChunks / 8>{});
      }
    } else {
      KvRaw raw;
      any_bad = fetch_kv_fp8(k0, stage, id, raw);
      store_kv_fp8(stage, raw);
    }
    return any_bad;
  }

  // fp8 KV: this thread's bytes of a tile, chunks part + 8u (8 values each)
  // of its key in each pass, held in registers from their loads to their
  // conversion, so that the loop can issue them a tile before it stores them.
  using KvRaw = uint2[kKvPasses][kChunks / kThreadsPerKey];

  // Issues the fp8 loads of the KV tile starting at key k0 (given
  // kv_slot_ids(k0)) into raw, zeros for keys that must not be read, and
  // flags `stage`'s out-of-range slots; returns whether this thread's keys
  // had one. Chunk part + 8u is 64 u bytes after chunk `part`: one address
  // a key, the rest offsets in the instructions.
  __device__ bool fetch_kv_fp8(int64_t k0, int stage, const KvIds& id, KvRaw& raw) const {
    bool any_bad = false;
    const int part = threadIdx.x % kThreadsPerKey;
#pragma unroll
    for (int pass = 0; pass < kKvPasses; ++pass) {
      const int key = pass * kKeysPerPass + threadIdx.x / kThreadsPerKey;
      bool bad;
      const uint8_t* src = key_row<uint8_t>(a, req, key_end, k0 + key, id[pass], part == 0, &bad);
      if (part == 0) bad_key(stage)[key] = bad;
      any_bad |= bad;
#pragma unroll
      for (int u = 0; u < kChunks / kThreadsPerKey; ++u) raw[pass][u] = make_uint2(0, 0);
      if (src != nullptr) {
        const uint2* chunk = reinterpret_cast<const uint2*>(src) + part;
#pragma unroll
        for (int u = 0; u < kChunks / kThreadsPerKey; ++u) raw[pass][u] = __ldg(chunk + u * kThreadsPerKey);
      }
    }
    return any_bad;
  }

  // fetch_kv_fp8's bytes converted to T (exactly: e4m3 is a subset of bf16
  // and f16) and stored into `stage`, a 16-byte chunk each: chunk part + 8u
  // 128 u bytes after chunk `part` in the swizzled tile (the swizzle keeps
  // a chunk's bits above the low three), one address a key.
  __device__ void store_kv_fp8(int stage, const KvRaw& raw) const {
    const int part = threadIdx.x % kThreadsPerKey;
    unsigned char* tile = smem + Cfg::kOffKv + stage * Cfg::kKvStageBytes;
#pragma unroll
    for (int pass = 0; pass < kKvPasses; ++pass) {
      uint4* chunk = reinterpret_cast<uint4*>(tile + swizzle(pass * kKeysPerPass + threadIdx.x / kThreadsPerKey, part));
#pragma unroll
      for (int u = 0; u < kChunks / kThreadsPerKey; ++u) chunk[u * kThreadsPerKey] = fp8x8_to<T>(raw[pass][u]);
    }
  }
};

template <class Cfg, class T, bool kKvFp8>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kBlocksPerSm) verify_paged_kernel(const PagedArgs a) {
#ifdef __CUDA_ARCH__
  if constexpr (!config_built_for<Cfg, kKvFp8>(__CUDA_ARCH__)) {
    return;
  } else {
    extern __shared__ __align__(128) unsigned char smem[];
    using Block = VerifyBlock<Cfg, T, kKvFp8>;
    constexpr int kBlockM = Cfg::kBlockM, kBlockN = Cfg::kBlockN, kQkN = Cfg::kQkN;
    constexpr int kQkTiles = Block::kQkTiles;
#ifndef KDTREE_QK_UNROLL
#define KDTREE_QK_UNROLL 4
#endif
    constexpr int kQkUnroll = KDTREE_QK_UNROLL;
    constexpr float kNegInf = -INFINITY;

    const int m_tile = blockIdx.x, split = blockIdx.y, b = blockIdx.z;
    const Request req = load_request(a, b, threadIdx.x == 0 && m_tile == 0 && split == 0);
    if (!req.valid) return;
    Block blk(a, smem, req, m_tile);
    if (blk.row0 >= blk.rows) return;
    split_range(req.num_keys, a.num_splits, split, kBlockN, &blk.key_begin, &blk.key_end);
    const int num_tiles = static_cast<int>((blk.key_end - blk.key_begin + kBlockN - 1) / kBlockN);

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4, c = lane % 4;
    // A row group is kGroupWarps consecutive warps (each SM sub-partition
    // holds one or two) owning 32 rows: its softmax and P V only wait for
    // each other (named barrier), so one group's barriers overlap the other
    // group's MMA.
    constexpr int kGroupWarps = Cfg::kGroupWarps, kODims = Cfg::kODims, kOTiles = kODims / 8;
    // (A compile-time 0 where a block has one row group: the barrier helpers
    // below then name one barrier, not a predicated pair.)
    const int row_group = Cfg::kRowGroups == 1 ? 0 : warp / kGroupWarps;
    const int key_slice = warp % kGroupWarps % Cfg::kKeySlices;
    const int dim_part = Cfg::kDimParts == 1 ? 0 : warp % kGroupWarps / Cfg::kKeySlices;  // of the QK's dims
    const int o_part = warp % kGroupWarps;                                                // of O's dims
    // The rows whose sum of S, mask and softmax this warp runs for its key
    // slice. Of the row group's four row pairs (8 rows each: pair p is the
    // accumulator rows (mt, half) = (p / 2, p % 2), rows 8p + g), it owns
    // kOwnPairs from pair0 on, held as an accumulator fragment of kOwnMt
    // tiles of kOwnHalves halves: all four where a key slice has one warp
    // (the large config), two (medium) or one (small) where the slice's dims
    // are split among kDimParts warps.
    constexpr int kOwnPairs = 4 / Cfg::kDimParts;
    constexpr int kOwnHalves = kOwnPairs >= 2 ? 2 : 1;
    constexpr int kOwnMt = kOwnPairs / kOwnHalves;
    const int pair0 = dim_part * kOwnPairs;
    const int warp_row0 = row_group * 32;
    static_assert(Cfg::kRowGroups <= 2, "two named barriers");
    const auto group_sync = [row_group]() {
      if (row_group == 0) {
        named_barrier_sync<1, kGroupWarps * 32>();
      } else {
        named_barrier_sync<2, kGroupWarps * 32>();
      }
    };
    const auto group_sync_or = [row_group](bool pred) {
      return row_group == 0 ? named_barrier_or<1, kGroupWarps * 32>(pred)
                            : named_barrier_or<2, kGroupWarps * 32>(pred);
    };

    const uint8_t* const tail_mask = request_tail_mask(a, req, b);
    // This thread's row (of the block) in row pair p, and in the warp's own
    // fragment tile m, half h.
    const auto pair_row = [&](int p) { return warp_row0 + 8 * p + g; };
    const auto own_row = [&](int m, int h) { return pair_row(pair0 + m * kOwnHalves + h); };
    // Token index of a row (-1: past the request). Recomputed where needed
    // (masked tiles, epilogue) rather than held in registers across the tile
    // loop.
    const auto row_token = [&](int row) {
      const int r = blk.row0 + row;
      return r < blk.rows ? r / a.num_heads : -1;
    };

    float o_acc[2][kOTiles][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int nt = 0; nt < kOTiles; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) o_acc[mt][nt][e] = 0.f;
    float w_acc[2][4];  // o_part-0 warps: rounded P times a ones column
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int e = 0; e < 4; ++e) w_acc[mt][e] = 0.f;
    float m_run[kOwnMt][kOwnHalves];  // own rows: running row max, base 2
    float l_run[kOwnMt][kOwnHalves];  // own rows: fp32 partial row sum over this key slice
#pragma unroll
    for (int m = 0; m < kOwnMt; ++m)
#pragma unroll
      for (int h = 0; h < kOwnHalves; ++h) {
        m_run[m][h] = kNegInf;
        l_run[m][h] = 0.f;
      }
    const bool sums_rows = o_part == 0;
    const uint32_t ones = pack2<T>(1.f, 1.f);

    // kStages - 1 tiles in flight ahead of the one computing: one cp.async
    // group per tile (empty past the split's end, so the count stays exact);
    // bit s of pending_bad: this thread saw an out-of-range slot in stage s.
    // next_ids: the slot ids of the next tile to gather, fetched a tile early.
    blk.load_q();
    uint32_t pending_bad = 0;
    typename Block::KvIds next_ids;
#pragma unroll
    for (int s = 0; s < Cfg::kStages - 1; ++s) {
      const int64_t k0 = blk.key_begin + int64_t{s} * kBlockN;
      blk.kv_slot_ids(k0, next_ids);
      if (s < num_tiles) pending_bad |= uint32_t{blk.load_kv(k0, s, next_ids)} << s;
      cp_async_commit();
    }
    blk.kv_slot_ids(blk.key_begin + int64_t{Cfg::kStages - 1} * kBlockN, next_ids);

    // With kQInRegisters: this warp's dims part of Q as A fragments, read once
    // from its staging copy in the last stage (in the first cp.async group,
    // with tile 0). The loop's first barrier orders these reads before that
    // stage's first gather.
    constexpr int kPartSteps = kHeadDim / 16 / Cfg::kDimParts;
    uint32_t q_frag[Cfg::kQInRegisters ? kPartSteps : 1][2][4];
    if constexpr (Cfg::kQInRegisters) {
      cp_async_wait<Cfg::kStages - 2>();
      __syncthreads();
#pragma unroll
      for (int j = 0; j < kPartSteps; ++j)
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          const int row = warp_row0 + mt * 16 + (lane % 16);
          ldmatrix_x4(q_frag[j][mt], blk.q_tile() + swizzle(row, (dim_part * kPartSteps + j) * 2 + lane / 16));
        }
    }

    int stage = 0;
    int load_stage = Cfg::kStages - 1;
    for (int tile = 0; tile < num_tiles; ++tile) {
      const int64_t k0 = blk.key_begin + static_cast<int64_t>(tile) * kBlockN;
      cp_async_wait<Cfg::kStages - 2>();
      const bool any_bad = __syncthreads_or((pending_bad >> stage) & 1u);  // tile landed; previous PV done
      pending_bad &= ~(1u << stage);
      // fp8 KV: the next tile's bytes loaded into registers here and stored
      // (converted) into its stage after this tile's P V, so that their
      // global latency runs under this tile's work.
      const bool loads_next = tile + Cfg::kStages - 1 < num_tiles;
      typename Block::KvRaw kv_raw;
      if (loads_next) {
        const int64_t k_load = k0 + int64_t{Cfg::kStages - 1} * kBlockN;
        if constexpr (kKvFp8) {
          pending_bad |= uint32_t{blk.fetch_kv_fp8(k_load, load_stage, next_ids, kv_raw)} << load_stage;
        } else {
          pending_bad |= uint32_t{blk.load_kv(k_load, load_stage, next_ids)} << load_stage;
        }
        blk.kv_slot_ids(k_load + kBlockN, next_ids);
      }
      cp_async_commit();

      const uint32_t kv = blk.kv_tile(stage);
      float s[2][kQkTiles][4];
      const int key_base = key_slice * kQkN;
      // This lane's K rows for ldmatrix (16 more a key pair) and its chunk in
      // each k-step's pair. Where the QK is fully unrolled (Q in registers),
      // the address at part step j is k_at[j % 4] + 32 j: the swizzle's low
      // chunk bits repeat every four steps, so four registers a tile serve
      // every step with the rest in the instruction.
      const int k_key = key_base + (lane & 7) + ((lane >> 4) << 3);
      const int k_chunk = (lane >> 3) & 1;
      uint32_t k_at[4];
      if constexpr (Cfg::kQInRegisters) {
#pragma unroll
        for (int j = 0; j < 4; ++j) k_at[j] = kv + swizzle(k_key, (dim_part * kPartSteps + j) * 2 + k_chunk) - 32 * j;
      }
      {
        // ---- 1. S = Q K^T over this warp's part of the 576 dims ----
        // With Cfg::kTwoQkChains, even and odd k-steps accumulate separately
        // (two mma chains of 18); off in every config today (perf notes v3).
        float s_odd[2][kQkTiles][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
          for (int nt = 0; nt < kQkTiles; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[mt][nt][e] = s_odd[mt][nt][e] = 0.f;
        // Fully unrolled where Q is in registers (its fragments are indexed
        // by the step).
#pragma unroll(Cfg::kQInRegisters ? kPartSteps : kQkUnroll)
        for (int part_step = 0; part_step < kPartSteps; ++part_step) {
          const int kstep = dim_part * kPartSteps + part_step;
          float (&acc)[2][kQkTiles][4] = (Cfg::kTwoQkChains && (kstep & 1)) ? s_odd : s;
          uint32_t af[2][4];
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            if constexpr (Cfg::kQInRegisters) {
#pragma unroll
              for (int i = 0; i < 4; ++i) af[mt][i] = q_frag[part_step][mt][i];
            } else {
              const int row = warp_row0 + mt * 16 + (lane % 16);
              ldmatrix_x4(af[mt], blk.q_tile() + swizzle(row, kstep * 2 + lane / 16));
            }
          }
#pragma unroll
          for (int np = 0; np < kQkTiles / 2; ++np) {
            uint32_t bf[4];
            if constexpr (Cfg::kQInRegisters) {
              ldmatrix_x4(bf, k_at[part_step % 4] + 32 * part_step + np * 16 * kHeadDim * 2);
            } else {
              ldmatrix_x4(bf, kv + swizzle(k_key + np * 16, kstep * 2 + k_chunk));
            }
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {
              mma_16816<T>(acc[mt][2 * np], af[mt], bf[0], bf[1]);
              mma_16816<T>(acc[mt][2 * np + 1], af[mt], bf[2], bf[3]);
            }
          }
        }
        if constexpr (Cfg::kTwoQkChains) {
#pragma unroll
          for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int nt = 0; nt < kQkTiles; ++nt)
#pragma unroll
              for (int e = 0; e < 4; ++e) s[mt][nt][e] += s_odd[mt][nt][e];
        }
      }
      // This warp's rows of the slice's S, summed over the dims parts (its
      // own part first, then the others in part order): its own fragment,
      // element (m, nt, e) of row own_row(m, e / 2).
      float sp[kOwnMt][kQkTiles][2 * kOwnHalves];
      if constexpr (Cfg::kDimParts == 1) {
#pragma unroll
        for (int m = 0; m < kOwnMt; ++m)
#pragma unroll
          for (int nt = 0; nt < kQkTiles; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) sp[m][nt][e] = s[m][nt][e];
      } else {
        // A reduce-scatter through shared memory: each warp stores its part
        // of the pairs other warps own, as [pair][from part][n8 tile] a float2
        // a lane within its (row group, key slice), then adds its own pairs'
        // other parts to its part of them.
        float2* const partial = reinterpret_cast<float2*>(smem + Cfg::kOffQkPartial);
        const int slice_pairs = (row_group * Cfg::kKeySlices + key_slice) * 4;
        // Pair p's part from its from-th dims part other than its owner.
        const auto slot = [&](int p, int from, int nt) {
          return (((slice_pairs + p) * (Cfg::kDimParts - 1) + from) * kQkTiles + nt) * 32 + lane;
        };
#pragma unroll
        for (int p = 0; p < 4; ++p) {
          if (p / kOwnPairs == dim_part) continue;
#pragma unroll
          for (int nt = 0; nt < kQkTiles; ++nt)
            partial[slot(p, dim_part - (dim_part > p / kOwnPairs), nt)] =
                make_float2(s[p / 2][nt][2 * (p % 2)], s[p / 2][nt][2 * (p % 2) + 1]);
        }
        group_sync();
#pragma unroll
        for (int m = 0; m < kOwnMt; ++m)
#pragma unroll
          for (int h = 0; h < kOwnHalves; ++h) {
            // Own pair i is pair pair0 + i, one of i, i + kOwnPairs, ...:
            // this warp's part of it selected from s among those.
            const int i = m * kOwnHalves + h;
#pragma unroll
            for (int nt = 0; nt < kQkTiles; ++nt) {
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                sp[m][nt][2 * h + e] = s[i / 2][nt][2 * (i % 2) + e];
#pragma unroll
                for (int p = i + kOwnPairs; p < 4; p += kOwnPairs)
                  if (pair0 + i == p) sp[m][nt][2 * h + e] = s[p / 2][nt][2 * (p % 2) + e];
              }
#pragma unroll
              for (int from = 0; from < Cfg::kDimParts - 1; ++from) {
                const float2 q = partial[slot(pair0 + i, from, nt)];
                sp[m][nt][2 * h] += q.x;
                sp[m][nt][2 * h + 1] += q.y;
              }
            }
          }
      }
      // The slice-local key of this lane's element (nt, e) of a row.
      const auto key_of = [&](int nt, int e) { return key_base + nt * 8 + 2 * c + (e & 1); };
      bool over = false;                 // a score past its row's m_run + kRescaleLog2
      float l_tile[kOwnMt][kOwnHalves];  // the tile's row sums against m_run
      // P of own row (m, half) against m_ref into the P tile; its sum.
      const auto store_p_row = [&](int m, int half, float m_ref) {
        const int row = own_row(m, half);
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < kQkTiles; ++nt) {
          const float p0 = exp2f(sp[m][nt][2 * half] - m_ref);
          const float p1 = exp2f(sp[m][nt][2 * half + 1] - m_ref);
          sum += p0 + p1;
          *reinterpret_cast<uint32_t*>(blk.p_tile() + row * Cfg::kPStride + key_of(nt, 0)) = pack2<T>(p0, p1);
        }
        return sum;
      };
      // Scale to base 2; mask only where the tile needs it (a block-uniform
      // branch), with every tail-mask byte loaded before any is tested.
#pragma unroll
      for (int m = 0; m < kOwnMt; ++m)
#pragma unroll
        for (int nt = 0; nt < kQkTiles; ++nt)
#pragma unroll
          for (int e = 0; e < 2 * kOwnHalves; ++e) sp[m][nt][e] *= a.scale_log2;
      if (any_bad || k0 + kBlockN > blk.key_end || k0 + kBlockN > req.prefix) {
        TailMaskRow mask_row[kOwnMt][kOwnHalves];
#pragma unroll
        for (int m = 0; m < kOwnMt; ++m)
#pragma unroll
          for (int h = 0; h < kOwnHalves; ++h) mask_row[m][h] = TailMaskRow(a, req, tail_mask, row_token(own_row(m, h)));
        uint8_t mask_byte[kOwnMt][kQkTiles][2 * kOwnHalves];
#pragma unroll
        for (int m = 0; m < kOwnMt; ++m)
#pragma unroll
          for (int nt = 0; nt < kQkTiles; ++nt)
#pragma unroll
            for (int e = 0; e < 2 * kOwnHalves; ++e) {
              mask_byte[m][nt][e] = mask_row[m][e >> 1].byte(a, req, blk.key_end, k0 + key_of(nt, e));
            }
#pragma unroll
        for (int m = 0; m < kOwnMt; ++m)
#pragma unroll
          for (int nt = 0; nt < kQkTiles; ++nt)
#pragma unroll
            for (int e = 0; e < 2 * kOwnHalves; ++e) {
              const int key_local = key_of(nt, e);
              const bool bad = any_bad && blk.bad_key(stage)[key_local];
              if (!key_visible(a, req, blk.key_end, k0 + key_local, mask_row[m][e >> 1].token, bad,
                               mask_byte[m][nt][e])) {
                sp[m][nt][e] = kNegInf;
              }
            }
      }
      // ---- 2. online softmax, P to shared memory ----
      // First against the running reference max m_run, which stands unless
      // a score of the row group's tile exceeds it by more than
      // kRescaleLog2 (rare after a row's first tile): then `over`, and the
      // exact pass below redoes P from the tile's maxima. Bitwise the exact
      // pass's result wherever no row rescales.
#pragma unroll
      for (int m = 0; m < kOwnMt; ++m)
#pragma unroll
        for (int half = 0; half < kOwnHalves; ++half) {
          const float bound = m_run[m][half] + kRescaleLog2;
#pragma unroll
          for (int nt = 0; nt < kQkTiles; ++nt) over |= sp[m][nt][2 * half] > bound || sp[m][nt][2 * half + 1] > bound;
          l_tile[m][half] = store_p_row(m, half, m_run[m][half] == kNegInf ? 0.f : m_run[m][half]);
        }
      // P's barrier and the row group's vote on the exact pass.
      const bool exact = group_sync_or(over);
      bool rescale = false;  // the exact pass moved some row's reference max
      if (!exact) {
#pragma unroll
        for (int m = 0; m < kOwnMt; ++m)
#pragma unroll
          for (int half = 0; half < kOwnHalves; ++half) l_run[m][half] += l_tile[m][half];
        if constexpr (Cfg::kRowGroups > 1) {
          // The exact pass's two barriers, passed here too: with two row
          // groups, one group passing more named barriers than the other
          // draws racecheck's false hazards between the gather and the
          // other group's P V (bench/probes/bar_red_racecheck.cu, UNEVEN
          // against BALANCED). The group's warps arrive together, straight
          // from the vote; measured cheaper than a block-wide vote (perf
          // notes, session 53).
          group_sync();
          group_sync();
        }
      } else {
        // Row maxima of the own rows over this key slice.
#pragma unroll
        for (int m = 0; m < kOwnMt; ++m)
#pragma unroll
          for (int half = 0; half < kOwnHalves; ++half) {
            float mx = kNegInf;
#pragma unroll
            for (int nt = 0; nt < kQkTiles; ++nt) mx = fmaxf(mx, fmaxf(sp[m][nt][2 * half], sp[m][nt][2 * half + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            if (c == 0) blk.red_max()[key_slice * kBlockM + own_row(m, half)] = mx;
          }
        group_sync();
        // The exact pass: P and alpha from the tile's maxima.
        bool any_rescale = false;
#pragma unroll
        for (int m = 0; m < kOwnMt; ++m)
#pragma unroll
          for (int half = 0; half < kOwnHalves; ++half) {
            const int row = own_row(m, half);
            float m_tile = kNegInf;
#pragma unroll
            for (int ks = 0; ks < Cfg::kKeySlices; ++ks) m_tile = fmaxf(m_tile, blk.red_max()[ks * kBlockM + row]);
            // Every key slice's warp takes the same decision from the same maxima.
            const bool row_rescale = m_tile > m_run[m][half] + kRescaleLog2;
            any_rescale |= row_rescale;
            const float m_new = row_rescale ? m_tile : m_run[m][half];
            const float m_ref = m_new == kNegInf ? 0.f : m_new;  // all masked so far: keep exp2 finite
            const float scale_old = row_rescale ? exp2f(m_run[m][half] - m_ref) : 1.f;
            l_run[m][half] = l_run[m][half] * scale_old + store_p_row(m, half, m_ref);
            m_run[m][half] = m_new;
            if (key_slice == 0 && c == 0) blk.alpha()[row] = scale_old;
          }
        // P's and alpha's barrier, and the row group's vote on the rescale.
        rescale = group_sync_or(any_rescale);
      }
      // ---- 3. O = alpha * O + P V ----
      if (rescale) {
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const float f = blk.alpha()[warp_row0 + mt * 16 + g + 8 * half];
#pragma unroll
            for (int nt = 0; nt < kOTiles; ++nt) {
              o_acc[mt][nt][2 * half] *= f;
              o_acc[mt][nt][2 * half + 1] *= f;
            }
            w_acc[mt][2 * half] *= f;
            w_acc[mt][2 * half + 1] *= f;
          }
      }
      const uint32_t p_base = smem_addr(blk.p_tile());
#pragma unroll
      for (int kstep = 0; kstep < kBlockN / 16; ++kstep) {
        uint32_t pf[2][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          const int row = warp_row0 + mt * 16 + (lane % 16);
          const int col = kstep * 16 + (lane / 16) * 8;
          ldmatrix_x4(pf[mt], p_base + (row * Cfg::kPStride + col) * 2);
          if (sums_rows) mma_16816<T>(w_acc[mt], pf[mt], ones, ones);
        }
#pragma unroll
        for (int dp = 0; dp < kOTiles / 2; ++dp) {
          uint32_t vf[4];
          const int key = kstep * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
          const int chunk = (o_part * kODims + dp * 16) / 8 + (lane >> 4);
          ldmatrix_x4_trans(vf, kv + swizzle(key, chunk));
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            mma_16816<T>(o_acc[mt][2 * dp], pf[mt], vf[0], vf[1]);
            mma_16816<T>(o_acc[mt][2 * dp + 1], pf[mt], vf[2], vf[3]);
          }
        }
      }
      // load_stage's last reader was the previous tile's P V, before this
      // tile's first barrier; the next tile's first barrier orders these
      // stores before its QK.
      if constexpr (kKvFp8) {
        if (loads_next) blk.store_kv_fp8(load_stage, kv_raw);
      }
      stage = stage + 1 == Cfg::kStages ? 0 : stage + 1;
      load_stage = load_stage + 1 == Cfg::kStages ? 0 : load_stage + 1;
    }

    // The split merge, if any, may now be scheduled (it waits for this grid).
    allow_dependent_launch();

    // ---- epilogue: share row sums and maxima, normalize, store ----
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        if (sums_rows && c == 0) blk.row_weight()[pair_row(2 * mt + half)] = w_acc[mt][2 * half];
      }
#pragma unroll
    for (int m = 0; m < kOwnMt; ++m)
#pragma unroll
      for (int half = 0; half < kOwnHalves; ++half) {
        const int row = own_row(m, half);
        float l = l_run[m][half];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        if (c == 0) blk.red_sum()[key_slice * kBlockM + row] = l;
        if (key_slice == 0 && c == 0) blk.row_max()[row] = m_run[m][half];
      }
    group_sync();

#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = pair_row(2 * mt + half);
        const int token = row_token(row);
        if (token < 0) continue;
        const int r = blk.row0 + row;
        const int h = r - token * a.num_heads;
        float l = 0.f;
#pragma unroll
        for (int ks = 0; ks < Cfg::kKeySlices; ++ks) l += blk.red_sum()[ks * kBlockM + row];
        // Divided by the row weight (row_divisor: fp8 KV was fed to the
        // tensor cores unscaled, kv_scale applies there).
        const RowDivisor div = row_divisor(a, blk.row_weight()[row]);
        // l == 0: no visible key. A NaN l (NaN in q or a key) propagates, in every split.
        const float lse = l != 0.f ? (blk.row_max()[row] + log2f(l)) * 0.69314718055994531f : kNegInf;
        // In place, before the store picks its dtype.
        normalize_row(a, div, [&](auto divide) {
#pragma unroll
          for (int nt = 0; nt < kOTiles; ++nt) {
            o_acc[mt][nt][2 * half] = divide(o_acc[mt][nt][2 * half]);
            o_acc[mt][nt][2 * half + 1] = divide(o_acc[mt][nt][2 * half + 1]);
          }
        });
        const int64_t t = req.q_start + token;
        store_out_row<kOTiles>(a, t, h, split, o_part * kODims + 2 * c, [&](int nt) {
          return make_float2(o_acc[mt][nt][2 * half], o_acc[mt][nt][2 * half + 1]);
        });
        if (o_part == 0 && c == 0) store_lse(a, t, h, split, lse);
      }
  }
#endif
}

}  // namespace kdtree::verify
