// Split-K tree-verify attention on Hopper (sm_90a): warpgroup MMA (wgmma).
//
// Same grid, split plan, workspace and merge as the portable kernel
// (verify_paged_kernel.cuh): block (m, s, b) takes query rows
// [64m, 64m + 64) of request b (row = token * H + head) and the keys of split
// s, 64 keys per tile, gathered by slot id with cp.async into a two-stage
// buffer while the current tile computes; the slot ids themselves travel by
// cp.async into shared memory a tile earlier still.
// 256 threads = two warpgroups; per tile:
//   1. warpgroup w: S_w = Q K^T for all 64 rows and keys [32w, 32w + 32) over
//      the 576 dims (36 wgmma m64n32k16, Q and K from shared memory), scaled
//      to base 2; the mask runs only on tiles with tail keys, a split end or
//      a flagged slot. Row maxima of both halves meet in shared memory.
//   2. online softmax with the lazy rescale of the portable kernel (both
//      warpgroups take the same decision from the same maxima); P (bf16/f16)
//      to shared memory.
//   3. warpgroup w: O[:, 256w .. 256w + 256) = alpha O + P V (4 wgmma
//      m64n256k16, V = the first 512 dims of the same tile read transposed),
//      and P times a ones column (m64n8k16), so O is normalized by the
//      tensor-core sum of the same rounded P (all-ones values give exactly 1).
//      Both warpgroups issue the same wgmma sequence: one in a divergent
//      branch would make ptxas serialize them all. (Leaving P V in flight
//      under the next tile's QK made ptxas serialize every wgmma, C7514.)
// Shared memory (224 KB + 2 KB): Q and each KV stage as nine 64-dim column
// blocks of [rows][128 B] in the 128-byte swizzle wgmma reads; P as one such
// block. Epilogue as the portable kernel: O / w and lse to the output, or
// the split's partial state for verify_paged_merge.
#include "common/cuda_check.hpp"
#include "common/mma.cuh"
#include "common/wgmma.cuh"
#include "verify/verify_paged_sm90a.hpp"

#include <cmath>
#include <string>

namespace kdtree::verify {
namespace {

constexpr int kRows = kSm90aRows;
constexpr int kKeys = kSm90aKeys;
constexpr int kThreads = 256;               // two warpgroups
constexpr int kDimBlocks = kHeadDim / 64;   // 64-dim column blocks of a row (9)
constexpr int kBlockBytes = kRows * 128;    // one column block of 64 rows
static_assert(kKeys == kRows, "Q and KV tiles share the column-block geometry");
constexpr int kTileBytes = kDimBlocks * kBlockBytes;  // Q or one KV stage (72 KB)

constexpr size_t kOffQ = 0;
constexpr size_t kOffKv = kOffQ + kTileBytes;          // [2] stages
constexpr size_t kOffP = kOffKv + 2 * kTileBytes;      // [64 rows][64 keys]
constexpr size_t kOffOnes = kOffP + kBlockBytes;       // 16 keys x 8 ones
constexpr size_t kOffRed = kOffOnes + 256;             // [2][64] f32: maxima, then sums
constexpr size_t kOffBadKey = kOffRed + 2 * kRows * 4;  // [2][64] u8
constexpr size_t kOffSlots = kOffBadKey + 2 * kKeys;    // [2][64] i64: slot ids a tile ahead
constexpr size_t kLayoutBytes = kOffSlots + 2 * kKeys * 8;
// The dynamic shared memory base is aligned up to 1024 B (the swizzle atom).
constexpr size_t kSmemBytes = kLayoutBytes + 1024;
static_assert(kSmemBytes <= 232448, "sm_90 opt-in shared memory");

template <class T>
struct Sm90aBlock {
  const PagedArgs& a;
  unsigned char* smem;
  Request req;
  int rows, row0;
  int64_t key_begin, key_end;

  // 2^x by the SFU alone (exp2f adds a denormal-range fix-up around it): the
  // arguments here are <= kRescaleLog2, and a probability below 2^-126 adds
  // nothing next to the row's maximum term 1.
  __device__ static float exp2_ftz(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
  }

  // Byte offset of 16-byte chunk `chunk` (0..71) of row `row` in a Q / KV tile.
  __device__ static uint32_t chunk_offset(int row, int chunk) {
    return static_cast<uint32_t>((chunk >> 3) * kBlockBytes + row * 128 + (((chunk ^ row) & 7) << 4));
  }
  // Ones: a 16 x 8 B operand needs no layout, every element being 1.
  __device__ uint64_t ones_desc() const { return wgmma_desc(base() + kOffOnes, 128, 256, WgmmaLayout::kInterleave); }

  __device__ uint32_t base() const { return smem_addr(smem); }
  __device__ uint8_t* bad_key(int stage) const { return smem + kOffBadKey + stage * kKeys; }
  __device__ float* red() const { return reinterpret_cast<float*>(smem + kOffRed); }

  // Q rows of the block; rows past the request are zero.
  __device__ void load_q() const {
    const int lane8 = threadIdx.x % 8;
#pragma unroll
    for (int pass = 0; pass < kRows / (kThreads / 8); ++pass) {
      const int r_local = pass * (kThreads / 8) + threadIdx.x / 8;
      const int r = row0 + r_local;
      bool ok;
      const T* src = q_row<T>(a, req, rows, r, &ok);
#pragma unroll
      for (int u = 0; u < kDimBlocks; ++u) {
        const int c = lane8 + 8 * u;
        cp_async_16(base() + kOffQ + chunk_offset(r_local, c), ok ? src + c * 8 : src, ok ? 16 : 0);
      }
    }
  }

  // This thread's keys of a tile: k0 + key_of(pass), 8 threads per key.
  __device__ static int key_of(int pass) { return pass * (kThreads / 8) + threadIdx.x / 8; }
  static constexpr int kPasses = kKeys / (kThreads / 8);
  __device__ const int64_t* slots(int stage) const {
    return reinterpret_cast<const int64_t*>(smem + kOffSlots) + stage * kKeys;
  }

  // Slot ids of the tile at k0 into shared memory with cp.async (threads
  // 0..63, one key each), a tile ahead of load_kv: no thread ever waits on
  // them. An int32 id goes to the low half of its 8-byte entry, whose high
  // half the kernel zeroed at the start (key_row sign-extends it); a key
  // that reads no id gets 0.
  __device__ void stage_slots(int64_t k0, int stage) const {
    if (threadIdx.x >= kKeys) return;
    const int64_t kk = k0 + threadIdx.x;
    const bool reads = key_reads_slot_id(a, req, key_end, kk);
    const uint32_t dst = base() + static_cast<uint32_t>(kOffSlots + (stage * kKeys + threadIdx.x) * 8);
    const int64_t at = reads ? req.kv_start + kk : 0;
    if (a.index_is_64) {
      cp_async_small<8>(dst, static_cast<const int64_t*>(a.kv_indices) + at, reads ? 8 : 0);
    } else {
      cp_async_small<4>(dst, static_cast<const int32_t*>(a.kv_indices) + at, reads ? 4 : 0);
    }
  }

  // Loads of the KV tile at key k0 into `stage`; true when one of this
  // thread's keys had an out-of-range slot.
  __device__ bool load_kv(int64_t k0, int stage) const {
    bool any_bad = false;
    const int lane8 = threadIdx.x % 8;
    const uint32_t tile = base() + kOffKv + stage * kTileBytes;
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
      const int key = key_of(pass);
      bool bad;
      const T* src = key_row<T>(a, req, key_end, k0 + key, slots(stage)[key], lane8 == 0, &bad);
      if (lane8 == 0) bad_key(stage)[key] = bad;
      any_bad |= bad;
      // A key that must not be read is zero-filled: 0 source bytes, the
      // address (kv_cache) never dereferenced.
      const int src_bytes = src != nullptr ? 16 : 0;
      if (src == nullptr) src = static_cast<const T*>(a.kv_cache);
#pragma unroll
      for (int u = 0; u < kDimBlocks; ++u) {
        const int c = lane8 + 8 * u;
        cp_async_16(tile + chunk_offset(key, c), src + c * 8, src_bytes);
      }
    }
    return any_bad;
  }
};

template <class T>
__global__ void __launch_bounds__(kThreads, 1) verify_paged_sm90a_kernel(const PagedArgs a) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  constexpr float kNegInf = -INFINITY;

  const int m_tile = blockIdx.x, split = blockIdx.y, b = blockIdx.z;
  const Request req = load_request(a, b, threadIdx.x == 0 && m_tile == 0 && split == 0);
  if (!req.valid) return;
  Sm90aBlock<T> blk{a, smem, req, req.q_len * a.num_heads, m_tile * kRows, 0, 0};
  if (blk.row0 >= blk.rows) return;
  split_range(req.num_keys, a.num_splits, split, kKeys, &blk.key_begin, &blk.key_end);
  const int num_tiles = static_cast<int>((blk.key_end - blk.key_begin + kKeys - 1) / kKeys);

  // Warpgroup: its key half in QK, its dim half in P V (broadcast from lane 0
  // so the compiler sees it warp-uniform).
  const int wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0);
  const int lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const int warp_row0 = (threadIdx.x / 32 % 4) * 16;  // this warp's accumulator rows
  const auto row_token = [&](int half) {
    const int r = blk.row0 + warp_row0 + g + 8 * half;
    return r < blk.rows ? r / a.num_heads : -1;
  };

  const uint32_t base = blk.base();
  if (threadIdx.x < 64) {
    reinterpret_cast<uint32_t*>(smem + kOffOnes)[threadIdx.x] = pack2<T>(1.f, 1.f);
  }
  if (threadIdx.x < 2 * kKeys) reinterpret_cast<int64_t*>(smem + kOffSlots)[threadIdx.x] = 0;
  __syncthreads();  // zeroed slot entries before any cp.async writes their low halves

  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.f;
  float w[4] = {0.f, 0.f, 0.f, 0.f};  // rounded P times ones: the rows' weights
  float m_run[2] = {kNegInf, kNegInf};
  float l_run[2] = {0.f, 0.f};  // fp32 partial row sums over this warpgroup's keys

  // Descriptors of each operand's first k-step; a k-step, column block or
  // stage adds its byte offset / 16 to the start-address field (every
  // address stays below 256 KB, so the field never carries).
  const uint64_t q_desc = wgmma_desc_sw128(base + kOffQ, 16, 1024);
  const uint64_t k_desc = wgmma_desc_sw128(base + kOffKv + wg * 32 * 128, 16, 1024);
  const uint64_t v_desc = wgmma_desc_sw128(base + kOffKv + wg * 4 * kBlockBytes, kBlockBytes, 1024);
  const uint64_t p_desc = wgmma_desc_sw128(base + kOffP, 16, 1024);
  const uint64_t ones_desc = blk.ones_desc();

  blk.load_q();
  // Tile 0's slot ids first (waited for here, once), then its rows; tile
  // 1's ids travel with them.
  if (num_tiles > 0) blk.stage_slots(blk.key_begin, 0);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  bool pending_bad = num_tiles > 0 ? blk.load_kv(blk.key_begin, 0) : false;
  if (num_tiles > 1) blk.stage_slots(blk.key_begin + kKeys, 1);
  cp_async_commit();

  for (int tile = 0; tile < num_tiles; ++tile) {
    const int stage = tile & 1;
    const int64_t k0 = blk.key_begin + static_cast<int64_t>(tile) * kKeys;
    cp_async_wait<0>();
    fence_proxy_async_smem();  // cp.async wrote through the generic proxy; wgmma reads async
    const bool any_bad = __syncthreads_or(pending_bad);  // tile landed; previous P V done

    // ---- 1. S = Q K^T: 64 rows x this warpgroup's 32 keys ----
    const uint32_t stage_off = stage * (kTileBytes >> 4);
    float s[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) s[i] = 0.f;  // overwritten by the first wgmma; keeps them defined
    wgmma_fence();
#pragma unroll
    for (int db = 0; db < kDimBlocks; ++db) {
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        const uint32_t step = (db * kBlockBytes + ks * 32) >> 4;
        wgmma_m64n32k16<T, 0>(s, q_desc + step, k_desc + stage_off + step, db | ks);
      }
    }
    wgmma_commit();
    // The next tile's gather (its slot ids already in shared memory) overlaps
    // the QK wgmma instead of delaying its issue.
    pending_bad = false;
    if (tile + 1 < num_tiles) pending_bad = blk.load_kv(k0 + kKeys, stage ^ 1);
    // Tile t + 2's ids go where tile t's were (read by the load_kv above in
    // the previous iteration).
    if (tile + 2 < num_tiles) blk.stage_slots(k0 + 2 * kKeys, stage);
    cp_async_commit();
    wgmma_wait<0>();

    const bool needs_mask = any_bad || k0 + kKeys > blk.key_end || k0 + kKeys > req.prefix;
#pragma unroll
    for (int i = 0; i < 16; ++i) s[i] *= a.scale_log2;
    if (needs_mask) {  // one block-uniform branch: unmasked tiles skip the mask code entirely
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const int key_local = wg * 32 + (i / 4) * 8 + 2 * c + (i & 1);
        const bool bad = any_bad && blk.bad_key(stage)[key_local];
        if (!key_visible(a, req, b, blk.key_end, k0 + key_local, row_token((i >> 1) & 1), bad)) s[i] = kNegInf;
      }
    }
    float mx[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      mx[half] = kNegInf;
#pragma unroll
      for (int j = 0; j < 4; ++j) mx[half] = fmaxf(mx[half], fmaxf(s[4 * j + 2 * half], s[4 * j + 2 * half + 1]));
      mx[half] = fmaxf(mx[half], __shfl_xor_sync(0xffffffffu, mx[half], 1));
      mx[half] = fmaxf(mx[half], __shfl_xor_sync(0xffffffffu, mx[half], 2));
      if (c == 0) blk.red()[wg * kRows + warp_row0 + g + 8 * half] = mx[half];
    }
    __syncthreads();  // both halves' maxima

    // ---- 2. online softmax; P to shared memory ----
    float scale_old[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = warp_row0 + g + 8 * half;
      const float m_tile = fmaxf(mx[half], blk.red()[(wg ^ 1) * kRows + row]);
      const bool rescale = m_tile > m_run[half] + kRescaleLog2;
      const float m_new = rescale ? m_tile : m_run[half];
      const float m_ref = m_new == kNegInf ? 0.f : m_new;  // all masked so far: keep exp2 finite
      scale_old[half] = rescale ? blk.exp2_ftz(m_run[half] - m_ref) : 1.f;
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float p0 = blk.exp2_ftz(s[4 * j + 2 * half] - m_ref);
        const float p1 = blk.exp2_ftz(s[4 * j + 2 * half + 1] - m_ref);
        sum += p0 + p1;
        const int key = wg * 32 + j * 8 + 2 * c;
        *reinterpret_cast<uint32_t*>(smem + kOffP + row * 128 + ((((key >> 3) ^ row) & 7) << 4) + (key & 7) * 2) =
            pack2<T>(p0, p1);
      }
      l_run[half] = l_run[half] * scale_old[half] + sum;
      m_run[half] = m_new;
    }
    fence_proxy_async_smem();
    __syncthreads();  // P complete; both halves' maxima read

    // ---- 3. O = alpha O + P V ----
    if (__any_sync(0xffffffffu, scale_old[0] != 1.f || scale_old[1] != 1.f)) {  // warp-uniform: no divergence
#pragma unroll
      for (int i = 0; i < 128; ++i) o[i] *= scale_old[(i >> 1) & 1];
#pragma unroll
      for (int i = 0; i < 4; ++i) w[i] *= scale_old[(i >> 1) & 1];
    }
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kKeys / 16; ++ks) {
      const uint64_t pd = p_desc + ((ks * 32) >> 4);
      wgmma_m64n256k16<T, 1>(o, pd, v_desc + stage_off + ((ks * 16 * 128) >> 4), 1);
      wgmma_m64n8k16<T, 0>(w, pd, ones_desc, 1);
    }
    wgmma_commit();
    wgmma_wait<0>();
  }

  // ---- epilogue: combine the halves' row sums, normalize, store ----
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float l = l_run[half];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    l_run[half] = l;
    const int row = warp_row0 + g + 8 * half;
    if (c == 0) blk.red()[wg * kRows + row] = l;
  }
  __syncthreads();
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int token = row_token(half);
    if (token < 0) continue;
    const int row = warp_row0 + g + 8 * half;
    const int h = blk.row0 + row - token * a.num_heads;
    const float l = l_run[half] + blk.red()[(wg ^ 1) * kRows + row];
    // Divide rather than multiply by 1/w: all-ones values then give exactly 1.
    const float div = w[2 * half] > 0.f ? w[2 * half] / a.out_scale : 1.f;
    // l == 0: no visible key. A NaN l (NaN in q or a key) propagates.
    const float lse = l != 0.f ? (m_run[half] + log2f(l)) * 0.69314718055994531f : kNegInf;
    const int64_t t = req.q_start + token;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      store_out_pair(a, t, h, split, l == 0.f, wg * 256 + j * 8 + 2 * c, o[4 * j + 2 * half] / div,
                     o[4 * j + 2 * half + 1] / div);
    }
    if (wg == 0 && c == 0) store_lse(a, t, h, split, lse);
  }
#endif
}

}  // namespace

bool sm90a_built() {
#if KDTREE_SM90A
  return true;
#else
  return false;
#endif
}

template <class T>
void launch_sm90a(const PagedArgs& a, cudaStream_t stream) {
  const int rows = a.max_q_len * a.num_heads;
  const dim3 grid((rows + kRows - 1) / kRows, a.num_splits, a.batch_size);
  verify_paged_sm90a_kernel<T><<<grid, kThreads, kSmemBytes, stream>>>(a);
  check_launch("kdtree_verify_paged", "verify_paged_sm90a_kernel");
}

template <class T>
void prepare_sm90a(size_t smem_optin, const char* function) {
  if (kSmemBytes > smem_optin) {
    fail(KDTREE_ERROR_UNSUPPORTED, function,
         "the sm_90a verify tiles need " + std::to_string(kSmemBytes) +
             " bytes of shared memory per block; the device offers " + std::to_string(smem_optin));
  }
  check_cuda(cudaFuncSetAttribute(verify_paged_sm90a_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(kSmemBytes)),
             function, "cudaFuncSetAttribute(verify_paged_sm90a_kernel)");
}

template void launch_sm90a<__nv_bfloat16>(const PagedArgs&, cudaStream_t);
template void launch_sm90a<__half>(const PagedArgs&, cudaStream_t);
template void prepare_sm90a<__nv_bfloat16>(size_t, const char*);
template void prepare_sm90a<__half>(size_t, const char*);

}  // namespace kdtree::verify
