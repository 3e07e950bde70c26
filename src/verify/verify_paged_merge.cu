// The split-K reduce of kdtree_verify_paged: merges the num_splits partial
// states of each (request row, head) into the output. The math of
// kdtree_merge_attention_states (out = sum_s exp(lse_s - lse) out_s), written
// as sum_s w_s out_s / sum_s w_s with w_s = exp(lse_s - m), m the largest
// lse summed so far (online: a larger lse rescales what was summed), so that
// states that are all exactly 1 merge to exactly 1 (the sums and the weight
// take the same operations); splits are summed in order (within a part, then
// the parts in order), so the result is deterministic for a fixed num_splits
// on a given device.
//
// Grid (batch * max_q_len, H / kHeads), one block per query row and kHeads
// heads, 256 threads in 64-thread groups (512 with 8 split parts: one head):
// group (split part p, head j) sums the splits [p * per, (p + 1) * per) of
// head j, thread k of it the latent quads k and k + 64 (dims [4k, 4k + 4)
// and [256 + 4k, 256 + 4k + 4); four f32 or bf16 values, the states'
// PagedArgs::partial_dtype).
// Rows past a request's q_len exit at once.
//   1. Each group sums its splits' states in chunks of kChunk (4 splits of
//      bf16 states, 2 of f32), each chunk's states and lse values loaded
//      together before any is summed, so a group costs per / kChunk memory
//      round trips and no block barrier before its sums (the lse values went
//      through shared memory and a maximum pass before session 25).
//   2. Split parts 1.. leave their sums and maxima in shared memory; part 0
//      adds them in order, rescaled to the larger maximum, divides and
//      stores.
// The host picks the split parts (1, 2, 4 or 8; heads fill the rest of the
// block) so the grid stays one wave of about 1024 threads per SM: rows with
// many splits (S1: 256 rows x 33 splits) get 8 parts of at most 5 splits
// (two chunks), an S8-sized merge (2048 rows x 4 splits) 1 part of 4 heads.
// A split whose lse is -inf (no visible key) is left out. On sm_90+ the
// merge is launched as a programmatic dependent of the split kernel
// (common/grid_dependency.cuh): its launch overlaps the split kernel's
// epilogue, and it waits for that kernel's completion before reading the
// partial states.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <type_traits>

#include "common/grid_dependency.cuh"
#include "common/mma.cuh"
#include "verify/verify_launch.hpp"
#include "verify/verify_paged_sm90a_stamps.cuh"
#include "verify/verify_paged_tiles.cuh"

namespace kdtree::verify {

namespace {

constexpr int kGroupThreads = kLatentDim / 8;
constexpr int kVecs = 2;  // float4s per thread, kGroupThreads apart
// Threads per block: 256, or one head's 8 parts (512 threads).
template <int kParts>
constexpr int kMergeThreads = kParts * kGroupThreads > 256 ? kParts * kGroupThreads : 256;
// Heads per block when each head's splits are summed in kParts parts.
template <int kParts>
constexpr int kHeadsPerBlock = kMergeThreads<kParts> / (kParts * kGroupThreads);

// The partial sums of one group: out (sum_s w_s state_s) and sum_s w_s, with
// w_s = exp(lse_s - max), max the largest lse summed (-inf: none yet).
struct GroupSum {
  float4 acc[kVecs];
  float weight;
  float max;

  // Nothing summed yet.
  __device__ static GroupSum none() {
    GroupSum sum{};
    sum.max = -INFINITY;
    return sum;
  }

  // Adds f times sums `v` and weight `w` (a split's state and 1, or another
  // part's sums), each by one fused multiply-add: where every value of v
  // equals w, the sums keep equal to the weight.
  __device__ void add_scaled(float f, const float4 (&v)[kVecs], float w) {
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
      acc[j] = make_float4(fmaf(f, v[j].x, acc[j].x), fmaf(f, v[j].y, acc[j].y), fmaf(f, v[j].z, acc[j].z),
                           fmaf(f, v[j].w, acc[j].w));
    }
    weight = fmaf(f, w, weight);
  }
  // Moves the sums to maximum m >= max (from max = -inf the factor is 0).
  __device__ void rescale_to(float m) {
    const float f = __expf(max - m);
#pragma unroll
    for (int j = 0; j < kVecs; ++j) acc[j] = make_float4(acc[j].x * f, acc[j].y * f, acc[j].z * f, acc[j].w * f);
    weight *= f;
    max = m;
  }
  // Adds sums `v` and weight `w` taken relative to maximum `lse` (a split's
  // state, 1 and its lse, or another part's sums): nothing when lse is -inf
  // (no visible key, or nothing summed), else rescaled to the larger maximum.
  // Group-uniform: every thread of a group holds the same lse.
  __device__ void add(float lse, const float4 (&v)[kVecs], float w) {
    if (lse == -INFINITY) return;
    if (lse > max) rescale_to(lse);
    add_scaled(__expf(lse - max), v, w);
  }
};

// Four output values at `out`: as they are in f32, else packed to bf16 / f16
// pairs (pack2, round to nearest).
template <class Out>
__device__ void store_float4(Out* out, float4 v) {
  if constexpr (std::is_same<Out, float>::value) {
    *reinterpret_cast<float4*>(out) = v;
  } else {
    *reinterpret_cast<uint2*>(out) = make_uint2(pack2<Out>(v.x, v.y), pack2<Out>(v.z, v.w));
  }
}

// The row's sums divided by their weight `div` (all-ones states give exactly
// 1): RowDivisor's refined division for f32 outputs, its product for 16-bit
// ones (within 1.5 ulp, which bf16 and f16 rounding leaves at the quotient's
// value; one reciprocal a thread instead of eight IEEE divisions).
template <class Out>
__device__ void store_row(const PagedArgs& a, int64_t at, int k, const float4 (&acc)[kVecs], const RowDivisor& div) {
  Out* out = static_cast<Out*>(a.out) + at;
  normalize_row_as<!std::is_same<Out, float>::value>(div, [&](auto divide) {
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
      const float4 x = acc[j];
      store_float4(out + 4 * (k + j * kGroupThreads), make_float4(divide(x.x), divide(x.y), divide(x.z), divide(x.w)));
    }
  });
}

// Four consecutive values of a partial state (PagedArgs::partial_dtype), as
// stored (Raw) and as f32.
template <class Partial>
struct Quad;
template <>
struct Quad<float> {
  using Raw = float4;
  __device__ static float4 get(float4 raw) { return raw; }
};
template <>
struct Quad<__nv_bfloat16> {
  using Raw = uint2;  // values 0 and 1 in x (0 in the low half), 2 and 3 in y
  __device__ static float4 get(uint2 raw) {
    return make_float4(__uint_as_float(raw.x << 16), __uint_as_float(raw.x & 0xffff0000u),
                       __uint_as_float(raw.y << 16), __uint_as_float(raw.y & 0xffff0000u));
  }
};

// Splits [s_begin, s_end) of one state, weighted online: `state` points at
// the thread's first quad of split 0, split_step quads apart, `lse` at split
// 0's lse, lse_step apart (every thread of the group reads the same ones).
// Every split kernel writes every state of a row it has, so a chunk of
// kChunk splits can be loaded with its lse values; a split whose lse is -inf
// is then left out by selection, whatever its state holds.
template <class Partial>
struct SplitSum {
  using Raw = typename Quad<Partial>::Raw;
  // 64 bytes of states in flight per thread: four splits of bf16 states,
  // two of f32 (four of those do not fit 64 registers on sm_80 / sm_120).
  static constexpr int kChunk = std::is_same<Partial, float>::value ? 2 : 4;
  const Raw* state;
  int64_t split_step;
  const float* lse;
  int64_t lse_step;
  int s_begin, s_end;
  Raw raw[kChunk][kVecs];
  float raw_lse[kChunk];

  __device__ void load_chunk(int s0) {
#pragma unroll
    for (int u = 0; u < kChunk; ++u) {
      raw_lse[u] = s0 + u < s_end ? lse[(s0 + u) * lse_step] : -INFINITY;
#pragma unroll
      for (int j = 0; j < kVecs; ++j) {
        if (s0 + u < s_end) raw[u][j] = state[(s0 + u) * split_step + j * kGroupThreads];
      }
    }
  }

  // The sum, given the chunk at s_begin loaded.
  __device__ GroupSum sum() {
    GroupSum sum = GroupSum::none();
    for (int s0 = s_begin; s0 < s_end; s0 += kChunk) {
      if (s0 != s_begin) load_chunk(s0);
#pragma unroll
      for (int u = 0; u < kChunk; ++u) {
        float4 v[kVecs];
#pragma unroll
        for (int j = 0; j < kVecs; ++j) v[j] = Quad<Partial>::get(raw[u][j]);
        sum.add(raw_lse[u], v, 1.f);  // (raw_lse is -inf past s_end)
      }
    }
    return sum;
  }
};

// 1024 threads per SM: the one-wave grid of launch_split_merge.
template <int kParts, class Partial>
__global__ void __launch_bounds__(kMergeThreads<kParts>, 1024 / kMergeThreads<kParts>)
    verify_split_merge_kernel(const PagedArgs a) {
  constexpr int kHeads = kHeadsPerBlock<kParts>;
  __shared__ GroupSum part_sum[kParts > 1 ? kParts - 1 : 1][kHeads][kGroupThreads];
  const bool stamp_thread = threadIdx.x == 0;  // (a stamps build's points: verify_paged_sm90a_stamps.cuh)
  if (stamp_thread) {
    KDTREE_STAMP(stamps::kEntryGlobal, stamps::global_time());
    KDTREE_STAMP(stamps::kEntryClock, stamps::clock());
  }
  const int b = blockIdx.x / a.max_q_len, i = blockIdx.x % a.max_q_len;
  const Request req = load_request(a, b, false);
  if (stamp_thread) KDTREE_STAMP(stamps::kMergeRequestLoaded, stamps::clock_after(req.q_len));
  if (!req.valid || i >= req.q_len) return;
  const int64_t t = req.q_start + i;
  const int64_t stride = a.total_q * a.num_heads;  // between splits, in states (partial_state's layout)
  const int h0 = blockIdx.y * kHeads;              // the block's first head
  const int heads = min(kHeads, a.num_heads - h0);
  const int group = threadIdx.x / kGroupThreads, k = threadIdx.x % kGroupThreads;
  const int part = group / kHeads, j = group % kHeads, h = h0 + j;
  const int64_t state0 = partial_state(a, 0, t, h);  // split 0's; also out's lse index
  const bool active = j < heads;  // groups past the last head only meet the barriers
  const int per = (a.num_splits + kParts - 1) / kParts;
  using Raw = typename Quad<Partial>::Raw;
  const Raw* state = reinterpret_cast<const Raw*>(static_cast<const Partial*>(a.partial_out) + state0 * kLatentDim) + k;
  SplitSum<Partial> splits{state, stride * (kLatentDim / 4), a.partial_lse + state0, stride,
                           min(part * per, a.num_splits), min((part + 1) * per, a.num_splits)};

  wait_for_prerequisite_grid();  // the split kernel's partial states
  if (stamp_thread) KDTREE_STAMP(stamps::kMergeWaited, stamps::clock());
  GroupSum sum = GroupSum::none();
  if (active) {
    splits.load_chunk(splits.s_begin);
    sum = splits.sum();
  }
  if (stamp_thread) KDTREE_STAMP(stamps::kMergeSummed, stamps::clock_after(__float_as_int(sum.weight)));
  if constexpr (kParts > 1) {
    if (part > 0) part_sum[part - 1][j][k] = sum;
    __syncthreads();
    if (part > 0) return;
#pragma unroll
    for (int p = 0; p < kParts - 1; ++p) {
      const GroupSum& other = part_sum[p][j][k];
      sum.add(other.max, other.acc, other.weight);
    }
    if (stamp_thread) KDTREE_STAMP(stamps::kMergePartsAdded, stamps::clock_after(__float_as_int(sum.weight)));
  }
  if (!active) return;
  // No visible key in any split: the sums stay 0 (divided by 1).
  const RowDivisor div(sum.max != -INFINITY ? sum.weight : 1.f);
  const int64_t at = t * a.out_stride_token + h * a.out_stride_head;
  if (a.out_dtype == KDTREE_DTYPE_F32) {
    store_row<float>(a, at, k, sum.acc, div);
  } else if (a.out_dtype == KDTREE_DTYPE_BF16) {
    store_row<__nv_bfloat16>(a, at, k, sum.acc, div);
  } else {
    store_row<__half>(a, at, k, sum.acc, div);
  }
  if (a.lse != nullptr && k == 0) {
    a.lse[state0] = sum.max == -INFINITY ? -INFINITY : sum.max + logf(sum.weight);
  }
  if (stamp_thread) {
    KDTREE_STAMP(stamps::kWg0EpilogueEnd, stamps::clock());
    KDTREE_STAMP(stamps::kWg0EndGlobal, stamps::global_time());
  }
}

template <int kParts, class Partial>
void launch_kernel(const PagedArgs& a, bool dependent_launch, cudaStream_t stream) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(a.batch_size * a.max_q_len, (a.num_heads + kHeadsPerBlock<kParts> - 1) / kHeadsPerBlock<kParts>);
  config.blockDim = dim3(kMergeThreads<kParts>);
  config.stream = stream;
  cudaLaunchAttribute attribute = {};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = dependent_launch ? 1 : 0;
  check_cuda(cudaLaunchKernelEx(&config, verify_split_merge_kernel<kParts, Partial>, a), "kdtree_verify_paged",
             "verify_split_merge_kernel");
#if KDTREE_SM90A_STAMPS
  stamps::print_after_launch(config.gridDim, stream, true);
#endif
}

template <int kParts>
void launch_parts(const PagedArgs& a, bool dependent_launch, cudaStream_t stream) {
  a.partial_dtype == KDTREE_DTYPE_BF16 ? launch_kernel<kParts, __nv_bfloat16>(a, dependent_launch, stream)
                                       : launch_kernel<kParts, float>(a, dependent_launch, stream);
}

}  // namespace

void launch_split_merge(const PagedArgs& a, int sm_count, bool dependent_launch, cudaStream_t stream) {
  // One wave of ~1024 threads per SM, each split part at least two splits.
  const int64_t rows = int64_t(a.batch_size) * a.max_q_len * a.num_heads;
  const auto fits = [&](int parts) {
    return a.num_splits >= 2 * parts && rows * parts * kGroupThreads <= int64_t(sm_count) * 1024;
  };
  if (fits(8)) return launch_parts<8>(a, dependent_launch, stream);
  if (fits(4)) return launch_parts<4>(a, dependent_launch, stream);
  if (fits(2)) return launch_parts<2>(a, dependent_launch, stream);
  launch_parts<1>(a, dependent_launch, stream);
}

}  // namespace kdtree::verify
