// kdtree_verify_paged_host: the fp64 CPU oracle of SPEC section 2.
//
// Loop order: request -> key -> (row, head). Each key row is decoded to
// double once per request and shared by every (row, head) that sees it;
// every (row, head) keeps an online softmax state (running max, sum of
// exponentials, 512 accumulators) in fp64. Online rescaling keeps the
// max-subtraction of a two-pass softmax while reading each key once, which
// keeps 128k-token prefixes affordable. The (row, head) pairs of a request
// are split over a few std::threads; every pair is computed by exactly one
// thread in key order, so the result does not depend on the thread count.
//
// Rules shared with the device kernels (so flags compare equal):
//  - a request is skipped, writing nothing and setting BAD_INDPTR, when its
//    ranges break request_ranges_ok or its mask bytes lie outside
//    [0, mask_indptr[B]) (src/common/request_rules.hpp);
//  - TAIL_FROM_INDICES with kv_len_b < q_len_b: rows get out 0 / lse -inf,
//    KV_SHORTER_THAN_Q is set, no index is read;
//  - every index of a request with at least one row is range-checked; an
//    index outside [0, num_slots) is an invisible key and sets
//    SLOT_OUT_OF_RANGE.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

#include "common/request_rules.hpp"
#include "merge/merge_math.cuh"
#include "reference/host_dtype.hpp"
#include "reference/reference.hpp"

namespace kdtree::reference {
namespace {

using namespace kdtree::host_dtype;

int64_t load_index(const void* indices, int64_t position, int32_t index_dtype) {
  if (index_dtype == KDTREE_DTYPE_INT64) return static_cast<const int64_t*>(indices)[position];
  return static_cast<const int32_t*>(indices)[position];
}

// One request, already checked: rows [qo_begin, qo_begin + q_len).
struct Request {
  int64_t qo_begin = 0;
  int32_t q_len = 0;
  int64_t kv_begin = 0;  // into kv_indices
  int64_t prefix = 0;
};

// out = acc / sum (0 when no key was visible: sum == 0, acc == 0).
void write_row(const kdtree_verify_paged_params& p, int64_t t, int32_t h, const double* acc,
               double sum, double lse) {
  int64_t base = t * p.out_stride_token + int64_t(h) * p.out_stride_head;
  for (int d = 0; d < p.head_dim_latent; ++d)
    store_element(p.out, base + d, p.out_dtype, sum > 0.0 ? acc[d] / sum : 0.0);
  if (p.lse) p.lse[t * p.num_heads + h] = static_cast<float>(lse);
}

void write_empty_rows(const kdtree_verify_paged_params& p, const Request& r) {
  std::vector<double> zeros(p.head_dim_latent, 0.0);
  for (int32_t i = 0; i < r.q_len; ++i)
    for (int32_t h = 0; h < p.num_heads; ++h)
      write_row(p, r.qo_begin + i, h, zeros.data(), 0.0, -std::numeric_limits<double>::infinity());
}

// Keys of one request as row pointers (nullptr: out of range, invisible).
std::vector<const void*> request_keys(const kdtree_verify_paged_params& p, const Request& r,
                                      int64_t kv_len, int32_t* flags) {
  size_t elem = p.kv_dtype == KDTREE_DTYPE_FP8_E4M3 ? 1 : 2;
  const char* cache = static_cast<const char*>(p.kv_cache);
  std::vector<const void*> keys;
  keys.reserve(size_t(r.prefix + r.q_len));
  for (int64_t j = 0; j < kv_len; ++j) {
    int64_t slot = load_index(p.kv_indices, r.kv_begin + j, p.index_dtype);
    if (slot < 0 || slot >= p.num_slots) {
      *flags |= KDTREE_FLAG_SLOT_OUT_OF_RANGE;
      keys.push_back(nullptr);
    } else {
      keys.push_back(cache + size_t(slot) * size_t(p.kv_stride_slot) * elem);
    }
  }
  if (p.tail_source == KDTREE_TAIL_FROM_EXTEND) {
    const char* tail = static_cast<const char*>(p.tail_kv);
    for (int32_t j = 0; j < r.q_len; ++j)
      keys.push_back(tail + size_t(r.qo_begin + j) * size_t(p.tail_kv_stride) * elem);
  }
  return keys;
}

// (row, head) pairs [pair_begin, pair_end) of request b; pair = i * H + h.
// Each pair accumulates D_L value columns plus one column of constant 1 (the
// softmax denominator) with the same expression, so all-ones values give
// exactly 1 and the division is the only normalization.
void attend_rows(const kdtree_verify_paged_params& p, int64_t b, const Request& r,
                 const std::vector<const void*>& keys, int64_t pair_begin, int64_t pair_end) {
  const int dim = p.head_dim_latent + p.head_dim_rope;
  const int dim_v = p.head_dim_latent;
  const int columns = dim_v + 1;  // values, then the denominator
  const int64_t pairs = pair_end - pair_begin;
  const double scale = p.sm_scale;
  std::vector<double> q(size_t(pairs) * dim);
  std::vector<double> acc(size_t(pairs) * columns, 0.0);
  std::vector<merge_math::RunningLse<double>> state(static_cast<size_t>(pairs));
  for (int64_t k = 0; k < pairs; ++k) {
    int64_t pair = pair_begin + k;
    int64_t t = r.qo_begin + pair / p.num_heads;
    int64_t h = pair % p.num_heads;
    int64_t base = t * p.q_stride_token + h * p.q_stride_head;
    for (int d = 0; d < dim; ++d) q[size_t(k) * dim + d] = load_element(p.q, base + d, p.q_dtype, 1.0);
  }

  std::vector<double> key(columns);
  key[dim_v] = 1.0;
  std::vector<double> rope(dim - dim_v);
  for (size_t j = 0; j < keys.size(); ++j) {
    if (!keys[j]) continue;
    for (int d = 0; d < dim_v; ++d) key[d] = load_element(keys[j], d, p.kv_dtype, p.kv_scale);
    for (int d = dim_v; d < dim; ++d) rope[d - dim_v] = load_element(keys[j], d, p.kv_dtype, p.kv_scale);
    const bool is_tail = int64_t(j) >= r.prefix;
    for (int64_t k = 0; k < pairs; ++k) {
      int32_t i = int32_t((pair_begin + k) / p.num_heads);
      if (is_tail && !tail_key_visible(p.mask_kind, request_mask(p, b), p.mask_row_bytes, r.prefix, r.q_len, i,
                                       int32_t(int64_t(j) - r.prefix))) {
        continue;
      }
      const double* qk = &q[size_t(k) * dim];
      double dot = 0.0;
      for (int d = 0; d < dim_v; ++d) dot += qk[d] * key[d];
      for (int d = dim_v; d < dim; ++d) dot += qk[d] * rope[d - dim_v];
      double s = scale * dot;
      double rescale = merge_math::running_max_raise(state[k], s);
      double weight = merge_math::scaled_exp(s, state[k].max);
      double* a = &acc[size_t(k) * columns];
      for (int d = 0; d < columns; ++d) a[d] = a[d] * rescale + weight * key[d];
    }
  }

  for (int64_t k = 0; k < pairs; ++k) {
    int64_t pair = pair_begin + k;
    const double* a = &acc[size_t(k) * columns];
    double sum = a[dim_v];
    write_row(p, r.qo_begin + pair / p.num_heads, int32_t(pair % p.num_heads), a, sum,
              merge_math::lse_of(state[k].max, sum));
  }
}

void attend_request(const kdtree_verify_paged_params& p, int64_t b, const Request& r,
                    const std::vector<const void*>& keys) {
  const int64_t pairs = int64_t(r.q_len) * p.num_heads;
  // Threads only pay off when a request has real work; a few per request.
  const int64_t work = pairs * int64_t(keys.size());
  unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  int64_t threads = std::min<int64_t>({int64_t(hw), pairs, std::max<int64_t>(1, work / 65536)});
  if (threads <= 1) {
    attend_rows(p, b, r, keys, 0, pairs);
    return;
  }
  // An exception leaving a std::thread, or unwinding past a joinable one,
  // calls std::terminate, and SPEC section 4 forbids aborting. So every range
  // keeps its first exception for this thread to rethrow after the joins (the
  // API guard turns it into a status), and a range whose thread cannot be
  // started (EAGAIN, bad_alloc) runs here instead: it is the same range in the
  // same key order, so the result does not change.
  std::exception_ptr error;
  std::mutex error_mutex;
  auto run = [&](int64_t begin, int64_t end) {
    try {
      attend_rows(p, b, r, keys, begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(size_t(threads));  // emplace_back below never reallocates
  for (int64_t w = 0; w < threads; ++w) {
    int64_t begin = pairs * w / threads, end = pairs * (w + 1) / threads;
    try {
      pool.emplace_back(run, begin, end);
    } catch (...) {
      run(begin, end);
    }
  }
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace

void verify_paged_host(const kdtree_verify_paged_params& p) {
  int32_t flags = 0;
  for (int64_t b = 0; b < p.batch_size; ++b) {
    const RequestIndptr ix = request_indptr(p, b);
    if (!request_ranges_ok(p, ix)) {
      flags |= KDTREE_FLAG_BAD_INDPTR;
      continue;
    }
    Request r;
    r.qo_begin = ix.q0;
    r.q_len = int32_t(ix.q1 - ix.q0);
    r.kv_begin = ix.k0;
    if (r.q_len == 0) continue;
    const int64_t kv_len = ix.k1 - ix.k0;
    if (!request_tail_fits(p.tail_source, kv_len, r.q_len)) {
      flags |= KDTREE_FLAG_KV_SHORTER_THAN_Q;
      write_empty_rows(p, r);
      continue;
    }
    r.prefix = request_prefix(p.tail_source, kv_len, r.q_len);
    if (!request_mask_in_bounds(p, ix, r.prefix, r.q_len)) {
      flags |= KDTREE_FLAG_BAD_INDPTR;
      continue;
    }
    std::vector<const void*> keys = request_keys(p, r, kv_len, &flags);
    attend_request(p, b, r, keys);
  }
  if (p.error_flag) *p.error_flag |= flags;
}

}  // namespace kdtree::reference
