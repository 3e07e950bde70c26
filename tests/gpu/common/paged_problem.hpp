// One random kdtree_verify_paged problem, in host memory and on the device,
// and the ways to run it: the CPU reference (fp64, f32 output), the GPU
// oracle, and the production kernel with a given num_splits.
//
// Poison and guards: slots no request references hold NaN; the out and lse
// buffers carry canary guard bands and a sentinel pattern in every byte
// before each device call, and rows no request owns (spec.extra_rows at the
// end) must still hold it afterwards.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "common/gpu_test.hpp"

namespace kdtest {

enum class Entry { kProduction, kOracle };
const char* entry_name(Entry entry);

// visible[i * q_len + j]: draft j is draft i or one of its ancestors; each
// draft's parent is an earlier draft (or the root).
std::vector<uint8_t> random_tree(Rng& rng, int q_len);
std::vector<uint8_t> causal_tree(int q_len);

struct PagedSpec {
  std::vector<int> q_lens;
  std::vector<int64_t> prefixes;
  int num_heads = 1;
  int32_t mask_kind = KDTREE_MASK_NONE;
  int32_t tail_source = KDTREE_TAIL_FROM_INDICES;
  int32_t index_dtype = KDTREE_DTYPE_INT32;
  int32_t kv_dtype = KDTREE_DTYPE_BF16;
  int32_t q_dtype = KDTREE_DTYPE_BF16;
  int32_t out_dtype = KDTREE_DTYPE_BF16;
  float kv_scale = 1.0f;       // FP8 only
  int extra_rows = 0;          // rows of q/out beyond qo_indptr[B], owned by no request
  // Bytes of padding after each head's 512 values and after each token's
  // heads in out (a multiple of 16; 0: out dense). Padding must stay untouched.
  int out_pad_bytes = 0;
  int max_q_len = 0;           // 0: the largest q_len (at least 1)
  int64_t spare_slots = 37;    // unreferenced slots (NaN)
  // 0: the referenced keys take a random permutation of the pool (a
  // fragmented cache). N: they take ascending runs of N consecutive slots
  // (a defragmented or page-allocated cache), the runs in random order with
  // 0-2 unreferenced slots before each, then spare_slots after the last.
  int64_t slot_run = 0;
  // Host fields pinned so that a refill keeps a captured graph's params
  // (0: derived from the lengths / drawn at random).
  int64_t num_slots = 0;       // >= referenced slots + 1
  int64_t max_kv_len = 0;
  float sm_scale = 0.0f;
  bool ones_values = false;    // value dims of every key = 1
  // Value dim d (< 512) of every key, request or tail (empty: ones_values or random).
  std::function<float(int)> value_dim;
  // Scores set by key (with ones_values: the softmax's rescale paths on
  // chosen data; tail from indices): key j of each request gets rope dims
  // (key_rope0(j), 0, ..., 0) and every query rope dims (1, 0, ..., 0), so a
  // row's score of key j is a constant of the row plus key_rope0(j).
  std::function<float(int64_t)> key_rope0;
  std::vector<std::vector<uint8_t>> trees;  // per request; empty: random trees
  // (position in kv_indices, value) written after generation (bad slots).
  std::vector<std::pair<int64_t, int64_t>> index_overrides;
  // Device capacity to keep for refill() with other lengths (graph replay).
  int64_t reserve_slots = 0, reserve_indices = 0, reserve_mask_bytes = 0;
};

struct PagedResult {
  std::vector<float> out;  // [total_q, H, 512] decoded
  std::vector<float> lse;  // [total_q, H]
  std::vector<uint8_t> out_bytes, lse_bytes;
  int32_t flag = 0;
  bool guards_ok = true;     // canaries around out and lse intact
  bool untouched_ok = true;  // rows of no request still hold the sentinel
};

struct Comparison {
  double rel_frobenius = 0.0;  // over rows of requests
  double lse_abs = 0.0;        // max |lse - lse_ref| (matching -inf counts as 0)
  int64_t nan_count = 0;
  bool inf_mismatch = false;   // -inf where the reference is finite or the reverse
};

class PagedProblem {
 public:
  PagedProblem(const PagedSpec& spec, Rng& rng);

  // New lengths and data in the same device buffers (within the host fields:
  // batch size, max_q_len, total_q, H and the reserved capacities).
  void refill(const PagedSpec& spec, Rng& rng);

  const PagedSpec& spec() const { return spec_; }
  int64_t total_q() const { return total_q_; }
  int64_t rows_in_requests() const;

  PagedResult run_host() const;  // fp64 reference, f32 out
  PagedResult run_device(Entry entry, int num_splits, cudaStream_t stream = nullptr);
  // Params on the device buffers (after reset_outputs()); enqueue only.
  kdtree_verify_paged_params device_params(int num_splits) const;
  void reset_outputs(cudaStream_t stream);
  void enqueue(Entry entry, int num_splits, cudaStream_t stream);  // uses workspace()
  PagedResult collect() const;  // after the stream is synchronized
  // out's strides in bytes (PagedSpec::out_pad_bytes).
  size_t out_head_bytes() const;
  size_t out_token_bytes() const;
  size_t workspace_bytes(int num_splits) const;

  Comparison compare(const PagedResult& got, const PagedResult& reference) const;

 private:
  void generate(Rng& rng);
  void upload();
  kdtree_verify_paged_params common_params() const;

  PagedSpec spec_;
  int64_t total_q_ = 0, num_slots_ = 0, max_kv_len_ = 1;
  int max_q_len_ = 1;
  float sm_scale_ = 1.0f;
  std::vector<int32_t> qo_indptr_, kv_indptr_;
  std::vector<int64_t> indices_;  // stored as index_dtype on the device
  std::vector<uint8_t> q_, kv_cache_, tail_kv_, mask_;
  std::vector<int64_t> mask_indptr_;
  int64_t mask_row_bytes_ = 1;

  DeviceBuffer d_q_, d_kv_cache_, d_tail_kv_, d_qo_indptr_, d_kv_indptr_, d_indices_, d_mask_,
      d_mask_indptr_, d_out_, d_lse_, d_flag_, d_workspace_;
};

// Pass/fail of a comparison against the fp64 reference (SPEC section 7).
bool within_bars(const Comparison& c, double max_rel_frobenius = 5e-3, double max_lse_abs = 1e-3);

}  // namespace kdtest
