// Device-side view of one kdtree_verify_paged call, shared by the split-K
// kernel and its merge: a POD copied into the kernel parameters, and the
// per-request bounds both kernels derive from the device-resident lengths.
#pragma once

#include <cstdint>

#include "common/mla_dims.hpp"
#include "common/mma.cuh"
#include "common/request_rules.hpp"
#include "kdtree_kernels.h"

namespace kdtree::verify {

// Lazy rescale threshold of the online softmax, in base-2 logits: the
// reference max moves only when a row's max grows by more than this.
#ifndef KDTREE_RESCALE_LOG2
#define KDTREE_RESCALE_LOG2 8.f
#endif
constexpr float kRescaleLog2 = KDTREE_RESCALE_LOG2;

struct PagedArgs {
  int32_t batch_size;
  int32_t num_heads;
  int32_t max_q_len;
  int32_t num_splits;
  // A lead plan (the sm_90a ping-pong kernel only; 0: every split alike, by
  // split_range). Splits 0..num_splits - 2 take lead_keys keys each of a
  // request's first keys, the last split the rest; the ping-pong's grid puts
  // the splits slowest, so the last splits' blocks start last, on the SMs the
  // lead splits leave free (verify_paged.cu, plan_lead_splits).
  int64_t lead_keys;
  int64_t total_q;
  float scale_log2;  // sm_scale * log2(e) (* kv_scale for fp8): softmax runs in base 2
  float out_scale;   // kv_scale for fp8 KV (values enter the tensor cores unscaled), else 1

  const void* q;
  int64_t q_stride_token;
  int64_t q_stride_head;

  const void* kv_cache;
  int64_t kv_stride_slot;
  int64_t num_slots;
  int32_t index_is_64;

  const int32_t* qo_indptr;
  const int32_t* kv_indptr;
  const void* kv_indices;

  int32_t tail_source;
  int32_t mask_kind;
  const void* tail_kv;
  int64_t tail_kv_stride;
  const uint8_t* mask;
  const int64_t* mask_indptr;
  int64_t mask_row_bytes;

  void* out;
  int32_t out_dtype;
  int64_t out_stride_token;
  int64_t out_stride_head;
  float* lse;
  int32_t* error_flag;

  // Split-K partial states (num_splits > 1): [splits, total_q, H, D_L] and
  // [splits, total_q, H] f32, indexed by the global query row. The states'
  // values are bf16 when the output is (they keep the output's precision at
  // half the bytes to write and read back), else f32.
  void* partial_out;
  int32_t partial_dtype;  // KDTREE_DTYPE_BF16 or KDTREE_DTYPE_F32
  float* partial_lse;
};

// One request's bounds as read from the device-resident indptrs. A request
// whose indptrs are inconsistent, or whose mask bytes would lie outside
// [0, mask_indptr[B]), is skipped (valid = false) and flagged; a
// TAIL_FROM_INDICES request with kv_len < q_len keeps its rows (they get
// out 0, lse -inf) but sees no key.
struct Request {
  bool valid;
  int32_t q_start;   // first global query row
  int32_t q_len;
  int64_t kv_start;  // offset into kv_indices
  int64_t prefix;    // prefix keys (from kv_indices)
  int64_t num_keys;  // prefix + tail keys this request attends over
};

__device__ __forceinline__ void raise_flag(int32_t* flag, int32_t bit) {
  if (flag != nullptr) atomicOr(flag, bit);
}

// `report` selects the one thread that raises flags for this request.
__device__ __forceinline__ Request load_request(const PagedArgs& a, int b, bool report) {
  Request r;
  const RequestIndptr ix = request_indptr(a, b);  // every entry in flight at once
  r.q_start = static_cast<int32_t>(ix.q0);
  r.q_len = static_cast<int32_t>(ix.q1 - ix.q0);
  r.kv_start = ix.k0;
  const int64_t kv_len = ix.k1 - ix.k0;
  r.valid = request_ranges_ok(a, ix);
  if (!r.valid) {
    if (report) raise_flag(a.error_flag, KDTREE_FLAG_BAD_INDPTR);
    r.q_len = 0;
    r.prefix = r.num_keys = 0;
    return r;
  }
  // request_tail_fits and request_prefix, written out: the same values, and
  // the measured prologue's code (their form changes its SASS, unmeasured).
  if (a.tail_source == KDTREE_TAIL_FROM_EXTEND) {
    r.prefix = kv_len;
    r.num_keys = kv_len + r.q_len;
  } else if (kv_len < r.q_len) {
    if (report) raise_flag(a.error_flag, KDTREE_FLAG_KV_SHORTER_THAN_Q);
    r.prefix = r.num_keys = 0;
  } else {
    r.prefix = kv_len - r.q_len;
    r.num_keys = kv_len;
  }
  // The mask's extent is checked once here, so the tile loop reads it unchecked.
  if (r.num_keys > r.prefix && !request_mask_in_bounds(a, ix, r.prefix, r.q_len)) {
    if (report) raise_flag(a.error_flag, KDTREE_FLAG_BAD_INDPTR);
    r.valid = false;
    r.q_len = 0;
    r.prefix = r.num_keys = 0;
  }
  return r;
}

// Keys per split of a request with num_keys keys: equal chunks rounded up to
// `granule` keys so every split but the last starts on a tile boundary (the
// launcher's kernel choice reads it too).
KDTREE_HOST_DEVICE constexpr int64_t split_chunk(int64_t num_keys, int num_splits, int granule) {
  return ((num_keys + num_splits - 1) / num_splits + granule - 1) / granule * granule;
}

// Keys [begin, end) of split `split` of a request of num_keys keys when each
// split takes `chunk` keys (the last one all the rest with last_takes_rest),
// clamped to the request.
__device__ __forceinline__ void chunk_range(int64_t num_keys, int64_t chunk, bool last_takes_rest, int num_splits,
                                            int split, int64_t* begin, int64_t* end) {
  const int64_t b = chunk * split;
  const int64_t e = last_takes_rest && split == num_splits - 1 ? num_keys : b + chunk;
  *begin = b < num_keys ? b : num_keys;
  *end = e < num_keys ? e : num_keys;
}

// Keys [begin, end) of split `split` of a request (split_chunk keys each).
__device__ __forceinline__ void split_range(int64_t num_keys, int num_splits, int split, int granule,
                                            int64_t* begin, int64_t* end) {
  chunk_range(num_keys, split_chunk(num_keys, num_splits, granule), false, num_splits, split, begin, end);
}

// Query row r (token * H + head) of the request, for the block's Q tile
// loads; the q base itself when r is past the request's `rows` (*ok false:
// the caller zero-fills without reading).
template <class T>
__device__ __forceinline__ const T* q_row(const PagedArgs& a, const Request& req, int rows, int r, bool* ok) {
  const T* src = static_cast<const T*>(a.q);
  *ok = r < rows;
  if (*ok) {
    const int i = r / a.num_heads, h = r - i * a.num_heads;
    src += (req.q_start + i) * a.q_stride_token + h * a.q_stride_head;
  }
  return src;
}

// Whether request key `kk` has a slot id to read: below key_end and not a
// tail key taken from tail_kv.
__device__ __forceinline__ bool key_reads_slot_id(const PagedArgs& a, const Request& req, int64_t key_end,
                                                  int64_t kk) {
  return kk < key_end && !(kk >= req.prefix && a.tail_source == KDTREE_TAIL_FROM_EXTEND);
}

// The raw slot ids stored for request keys kk[0..N) as key_row takes them:
// an int64 id as is, an int32 id zero-extended (key_row sign-extends it; the
// sm_90a kernel stages ids as raw bytes in shared memory); 0 for a key that
// reads no id. By predicated loads: no load sits under a branch, whose join
// would wait for it, so all N are in flight together (one round trip, not N).
// Id: uint64_t or uint32_t, as a.index_is_64 says.
template <class Id, int N>
__device__ __forceinline__ void key_slot_ids_as(const PagedArgs& a, const Request& req, int64_t key_end,
                                                const int64_t (&kk)[N], int64_t (&id)[N]) {
  static_assert(sizeof(Id) == 8 || sizeof(Id) == 4, "64- or 32-bit ids");
#pragma unroll
  for (int i = 0; i < N; ++i) {
    Id v = 0;
    const Id* at = static_cast<const Id*>(a.kv_indices) + req.kv_start + kk[i];
    const uint32_t reads = key_reads_slot_id(a, req, key_end, kk[i]);
    if constexpr (sizeof(Id) == 8) {
      asm("{\n.reg .pred p;\nsetp.ne.u32 p, %2, 0;\n@p ld.global.nc.u64 %0, [%1];\n}" : "+l"(v) : "l"(at), "r"(reads));
    } else {
      asm("{\n.reg .pred p;\nsetp.ne.u32 p, %2, 0;\n@p ld.global.nc.u32 %0, [%1];\n}" : "+r"(v) : "l"(at), "r"(reads));
    }
    id[i] = static_cast<int64_t>(v);  // an int32 id zero-extended
  }
}
template <int N>
__device__ __forceinline__ void key_slot_ids(const PagedArgs& a, const Request& req, int64_t key_end,
                                             const int64_t (&kk)[N], int64_t (&id)[N]) {
  if (a.index_is_64) {
    key_slot_ids_as<uint64_t>(a, req, key_end, kk, id);
  } else {
    key_slot_ids_as<uint32_t>(a, req, key_end, kk, id);
  }
}

// The slot a raw slot id (key_slot_ids') names: an int64 id as is, an int32
// id sign-extended (negative ids stay negative, so out of range).
__device__ __forceinline__ int64_t slot_of(const PagedArgs& a, int64_t slot_id) {
  return a.index_is_64 ? slot_id : static_cast<int32_t>(slot_id);
}

// The KV-cache row of raw slot id `slot_id` (key_slot_ids'), or nullptr with
// *bad_slot set when the slot is out of range: key_row for a key below
// key_end that reads its slot id, with none of its other cases.
template <class KvElem>
__device__ __forceinline__ const KvElem* slot_row(const PagedArgs& a, int64_t slot_id, bool* bad_slot) {
  const int64_t slot = slot_of(a, slot_id);
  const bool bad = static_cast<uint64_t>(slot) >= static_cast<uint64_t>(a.num_slots);  // or negative
  *bad_slot = bad;
  return bad ? nullptr : static_cast<const KvElem*>(a.kv_cache) + slot * a.kv_stride_slot;
}

// Address of request key `kk` (request key index) in the KV storage, given
// its raw slot id (key_slot_ids), or nullptr when it must not be read: at or past key_end,
// or an out-of-range slot (*bad_slot set, flagged by the `report` thread).
template <class KvElem>
__device__ __forceinline__ const KvElem* key_row(const PagedArgs& a, const Request& req, int64_t key_end, int64_t kk,
                                                 int64_t slot_id, bool report, bool* bad_slot) {
  // Both candidate rows are formed and one is selected, with no branch but
  // the rare flag: the gathers issue the keys of a tile without serializing.
  const int64_t slot = slot_of(a, slot_id);
  const bool in_split = kk < key_end;
  const bool from_tail = kk >= req.prefix && a.tail_source == KDTREE_TAIL_FROM_EXTEND;
  const bool bad = in_split && !from_tail && (slot < 0 || slot >= a.num_slots);
  *bad_slot = bad;
  if (bad && report) raise_flag(a.error_flag, KDTREE_FLAG_SLOT_OUT_OF_RANGE);
  const KvElem* tail =
      static_cast<const KvElem*>(a.tail_kv) + (from_tail ? req.q_start + (kk - req.prefix) : 0) * a.tail_kv_stride;
  const KvElem* row = static_cast<const KvElem*>(a.kv_cache) + (bad ? 0 : slot) * a.kv_stride_slot;
  return !in_split || bad ? nullptr : from_tail ? tail : row;
}

// Request b's mask bytes when it has tail keys (load_request checked their
// extent), else nullptr: a request with no tail key has no checked mask.
__device__ __forceinline__ const uint8_t* request_tail_mask(const PagedArgs& a, const Request& req, int b) {
  return req.num_keys > req.prefix ? request_mask(a, b) : nullptr;
}

// One query row's view of its request's tail mask: where its mask bytes
// start, so that each key's byte is an add away and a tile's bytes can all be
// in flight before any is tested. `mask` is request_tail_mask; `token` the
// row's query token (-1: a padding row past the request).
struct TailMaskRow {
  const uint8_t* bytes;  // nullptr: nothing to read (no mask bytes, or a padding row)
  int token;

  TailMaskRow() = default;
  __device__ TailMaskRow(const PagedArgs& a, const Request& req, const uint8_t* mask, int token_)
      : bytes(mask != nullptr && token_ >= 0
                  ? mask + tail_mask_row_offset(a.mask_kind, a.mask_row_bytes, req.prefix, req.q_len, token_)
                  : nullptr),
        token(token_) {}

  // Key kk's byte, read with no branch; 0 with nothing to read. A key that
  // is no tail key below key_end reads the row's first byte instead (it
  // exists whenever `bytes` is set).
  __device__ uint8_t byte(const PagedArgs& a, const Request& req, int64_t key_end, int64_t kk) const {
    const bool tail = kk >= req.prefix && kk < key_end;
    const int32_t column = tail ? tail_mask_column(a.mask_kind, int32_t(kk - req.prefix)) : 0;
    return bytes != nullptr ? bytes[column] : uint8_t{0};
  }
};

// Whether key kk (split keys end at key_end) is visible to the request's
// query token `token` (-1: a padding row), given the key's byte from the
// token's TailMaskRow. Tail keys follow the mask; a flagged slot is never
// visible.
__device__ __forceinline__ bool key_visible(const PagedArgs& a, const Request& req, int64_t key_end, int64_t kk,
                                            int token, bool bad_slot, uint8_t mask_byte) {
  const int32_t j = kk >= req.prefix ? int32_t(kk - req.prefix) : 0;  // the tail key; 0 keeps j % 8 defined
  const bool by_mask = a.mask_kind == KDTREE_MASK_NONE     ? true
                       : a.mask_kind == KDTREE_MASK_CAUSAL ? j <= token
                                                           : tail_mask_byte_visible(a.mask_kind, mask_byte, j);
  return kk < key_end && !bad_slot && (kk < req.prefix || token < 0 || by_mask);
}

// x / d for the values of one row: one IEEE reciprocal per row, then per
// value a product refined by one Newton step, with no branch (x == d still
// gives exactly 1, so all-ones values normalize to exactly 1; NaN propagates).
struct RowDivisor {
  float d, r;
  __device__ explicit RowDivisor(float divisor) : d(divisor), r(1.f / divisor) {}
  __device__ float operator()(float x) const {
    const float q = x * r;
    return fmaf(fmaf(-q, d, x), r, q);
  }
  // The product alone, for rows stored in 16 bits (stores_16bit): within
  // 1.5 ulp of x / d, and x == d gives 1 or 1 - 2^-24 (d r = 1 + e with
  // |e| <= 2^-24), which bf16 and f16 round to exactly 1. A third of the
  // division's instructions, in an epilogue that runs once per block from a
  // cold instruction cache.
  __device__ float product(float x) const { return x * r; }
};

// Whether the call's rows go out in 16 bits: a bf16 / f16 output, or bf16
// partial states (verify_paged.cu's partial_dtype).
__host__ __device__ __forceinline__ bool stores_16bit(const PagedArgs& a) {
  return a.num_splits > 1 ? a.partial_dtype != KDTREE_DTYPE_F32 : a.out_dtype != KDTREE_DTYPE_F32;
}

// Where a kernel's epilogue sends the rows, when the kernel is compiled for
// one route (the sm_90a kernels' kRoute): 16-bit rows to bf16 partial states
// (several splits) or to a bf16 / f16 out (one split), or kAnyRoute for a
// kernel that asks the call (f32 rows there, every route in the portable
// kernel). route_of: the route of the call's rows.
constexpr int kAnyRoute = 0, kToPartials = 1, kToOut = 2;
__host__ __device__ __forceinline__ int route_of(const PagedArgs& a) {
  if (!stores_16bit(a)) return kAnyRoute;
  return a.num_splits > 1 ? kToPartials : kToOut;
}

// The divisor of a row with weight `weight` (P times ones): out_scale applies
// here (fp8 KV went to the tensor cores unscaled); no visible key divides by 1.
__device__ __forceinline__ RowDivisor row_divisor(const PagedArgs& a, float weight) {
  return RowDivisor(weight > 0.f ? weight / a.out_scale : 1.f);
}

// A row's values divided by `div` (all-ones values give exactly 1):
// normalize(divide) runs once, with RowDivisor's product when the rows go out
// in 16 bits, else with its refined division (one copy of each form, before
// the store picks its dtype).
// normalize_row_as<k16bit> when the kernel knows the rows' width at compile
// time (the sm_90a ping-pong kernel's kF32Rows): one form in its code.
template <bool k16bit, class Normalize>
__device__ __forceinline__ void normalize_row_as(const RowDivisor& div, const Normalize& normalize) {
  if constexpr (k16bit) {
    normalize([&](float x) { return div.product(x); });
  } else {
    normalize(div);
  }
}
template <class Normalize>
__device__ __forceinline__ void normalize_row(const PagedArgs& a, const RowDivisor& div, const Normalize& normalize) {
  if (stores_16bit(a)) {
    normalize_row_as<true>(div, normalize);
  } else {
    normalize_row_as<false>(div, normalize);
  }
}

// Split `split`'s partial state of global query row t, head h: its index in
// partial_lse, and times kLatentDim its first element in partial_out.
__device__ __forceinline__ int64_t partial_state(const PagedArgs& a, int64_t split, int64_t t, int h) {
  return (split * a.total_q + t) * a.num_heads + h;
}

// Output dims dim0 + 8j and dim0 + 8j + 1 (j < kPairs) of global query row t,
// head h, their values pair(j) (a float2, already normalized): to out when
// the call has one split, else to split `split`'s partial state (written for
// a row with no visible key too: the merge loads states before it knows
// which to leave out). The destination and dtype are picked once per row,
// so the executed store code stays short; a kernel compiled for one route
// (kRoute) has only that route's code.
//
// A bf16 partial state is stored in whole 32-byte sectors: the four lanes of
// a quad (lane % 4 = c, dim0 = base + 2c, the mma accumulator layout) hold
// dims 16m + {2c, 2c + 1} (pair 2m) and 16m + 8 + {2c, 2c + 1} (pair 2m + 1)
// of the row; two exchanges within the quad give lane c dims 16m + 4c ..
// 16m + 4c + 3, one 8-byte store. (Pair-wise 4-byte stores would write
// half sectors, which cost the SM's path to L2 as much as whole ones.) The
// quad's lanes call this together. With kWholeWarp every lane of the warp
// calls it together, `store` false on lanes whose row is not stored, and the
// exchanges are whole-warp shuffles: a quad's mask in code that may have
// diverged compiles to a collective sequence around each shuffle (the
// single-warpgroup kernel's partial-state epilogue: 1,930 instructions
// with the quad's mask, 804 with kWholeWarp).
template <int kPairs, int kRoute = kAnyRoute, bool kWholeWarp = false, class Pair>
__device__ __forceinline__ void store_out_row(const PagedArgs& a, int64_t t, int h, int split, int dim0,
                                              const Pair& pair, bool store = true) {
  if (kRoute == kToPartials || (kRoute == kAnyRoute && a.num_splits > 1)) {
    const int64_t state = partial_state(a, split, t, h);
    if (kRoute == kAnyRoute && a.partial_dtype == KDTREE_DTYPE_F32) {
      if (!store) return;
      float* dst = static_cast<float*>(a.partial_out) + state * kLatentDim + dim0;
#pragma unroll
      for (int j = 0; j < kPairs; ++j) *reinterpret_cast<float2*>(dst + 8 * j) = pair(j);
      return;
    }
    static_assert(kPairs % 2 == 0, "bf16 states are stored two pairs (16 dims) at a time");
    const int c = threadIdx.x % 4;
    const unsigned quad = kWholeWarp ? 0xffffffffu : 0xfu << (threadIdx.x % 32 - c);
    __nv_bfloat16* dst = static_cast<__nv_bfloat16*>(a.partial_out) + state * kLatentDim + (dim0 - 2 * c) + 4 * c;
#pragma unroll
    for (int m = 0; m < kPairs / 2; ++m) {
      const float2 v0 = pair(2 * m), v1 = pair(2 * m + 1);
      const uint32_t w0 = pack2<__nv_bfloat16>(v0.x, v0.y), w1 = pack2<__nv_bfloat16>(v1.x, v1.y);
      // Word k holds dims 16m + 2k, 2k + 1: lane c starts with k = c (w0) and
      // c + 4 (w1). After the exchange with lane c ^ 2, lanes 0, 1 hold
      // k = c, c + 2 and lanes 2, 3 hold k = c + 2, c + 4 (lo, hi); after the
      // one with lane c ^ 1, lane c holds k = 2c, 2c + 1.
      const uint32_t got2 = __shfl_xor_sync(quad, c < 2 ? w1 : w0, 2);
      const uint32_t lo = c < 2 ? w0 : got2, hi = c < 2 ? got2 : w1;
      const uint32_t got1 = __shfl_xor_sync(quad, c & 1 ? lo : hi, 1);
      const uint2 words = c & 1 ? make_uint2(got1, hi) : make_uint2(lo, got1);
      if (store) *reinterpret_cast<uint2*>(dst + 16 * m) = words;
    }
    return;
  }
  if (!store) return;
  const int64_t at = t * a.out_stride_token + h * a.out_stride_head + dim0;
  if (kRoute == kAnyRoute && a.out_dtype == KDTREE_DTYPE_F32) {
    float* dst = static_cast<float*>(a.out) + at;
#pragma unroll
    for (int j = 0; j < kPairs; ++j) *reinterpret_cast<float2*>(dst + 8 * j) = pair(j);
  } else if (a.out_dtype == KDTREE_DTYPE_BF16) {
    __nv_bfloat16* dst = static_cast<__nv_bfloat16*>(a.out) + at;
#pragma unroll
    for (int j = 0; j < kPairs; ++j) {
      const float2 v = pair(j);
      *reinterpret_cast<uint32_t*>(dst + 8 * j) = pack2<__nv_bfloat16>(v.x, v.y);
    }
  } else {
    __half* dst = static_cast<__half*>(a.out) + at;
#pragma unroll
    for (int j = 0; j < kPairs; ++j) {
      const float2 v = pair(j);
      *reinterpret_cast<uint32_t*>(dst + 8 * j) = pack2<__half>(v.x, v.y);
    }
  }
}

// The row's lse (natural log; -inf when no key was visible) to lse or the
// split's partial lse.
__device__ __forceinline__ void store_lse(const PagedArgs& a, int64_t t, int h, int split, float lse) {
  if (a.num_splits == 1) {
    if (a.lse != nullptr) a.lse[t * a.num_heads + h] = lse;
  } else {
    a.partial_lse[partial_state(a, split, t, h)] = lse;
  }
}

}  // namespace kdtree::verify
