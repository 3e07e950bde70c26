#include "common/paged_problem.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>

namespace kdtest {
namespace {

constexpr int kDimLatent = 512;
constexpr int kDim = 576;

void ensure_capacity(DeviceBuffer& buffer, size_t bytes) {
  if (buffer.data() == nullptr) {
    buffer = DeviceBuffer(std::max<size_t>(bytes, 16));
  } else if (bytes > buffer.size()) {
    std::fprintf(stderr, "PagedProblem::refill: %zu bytes exceed the reserved %zu\n", bytes, buffer.size());
    std::exit(1);
  }
}

}  // namespace

const char* entry_name(Entry entry) {
  return entry == Entry::kProduction ? "kdtree_verify_paged" : "kdtree_verify_paged_reference";
}

std::vector<uint8_t> random_tree(Rng& rng, int q_len) {
  std::vector<int> parent(q_len, -1);
  for (int i = 1; i < q_len; ++i) parent[i] = int(rng.range(-1, i - 1));
  std::vector<uint8_t> visible(size_t(q_len) * q_len, 0);
  for (int i = 0; i < q_len; ++i)
    for (int j = i; j >= 0; j = parent[j]) visible[size_t(i) * q_len + j] = 1;
  return visible;
}

std::vector<uint8_t> causal_tree(int q_len) {
  std::vector<uint8_t> visible(size_t(q_len) * q_len, 0);
  for (int i = 0; i < q_len; ++i)
    for (int j = 0; j <= i; ++j) visible[size_t(i) * q_len + j] = 1;
  return visible;
}

PagedProblem::PagedProblem(const PagedSpec& spec, Rng& rng) : spec_(spec) {
  generate(rng);
  upload();
}

void PagedProblem::refill(const PagedSpec& spec, Rng& rng) {
  spec_ = spec;
  generate(rng);
  upload();
}

int64_t PagedProblem::rows_in_requests() const { return qo_indptr_.back(); }

void PagedProblem::generate(Rng& rng) {
  const PagedSpec& s = spec_;
  const int batch = int(s.q_lens.size());
  const bool from_indices = s.tail_source == KDTREE_TAIL_FROM_INDICES;
  max_q_len_ = s.max_q_len > 0 ? s.max_q_len : std::max(1, *std::max_element(s.q_lens.begin(), s.q_lens.end()));
  qo_indptr_.assign(batch + 1, 0);
  kv_indptr_.assign(batch + 1, 0);
  max_kv_len_ = 1;
  for (int b = 0; b < batch; ++b) {
    qo_indptr_[b + 1] = qo_indptr_[b] + s.q_lens[b];
    kv_indptr_[b + 1] = kv_indptr_[b] + int32_t(s.prefixes[b] + (from_indices ? s.q_lens[b] : 0));
    max_kv_len_ = std::max<int64_t>(max_kv_len_, s.prefixes[b] + s.q_lens[b]);
  }
  total_q_ = qo_indptr_.back() + s.extra_rows;
  if (s.max_kv_len > 0) max_kv_len_ = s.max_kv_len;
  sm_scale_ = s.sm_scale > 0.0f ? s.sm_scale : 1.0f / std::sqrt(float(kDim)) * rng.uniform(0.5f, 2.0f);

  // Slots: a random permutation of the pool, or runs (PagedSpec::slot_run);
  // the unreferenced rest is NaN.
  const int64_t used = kv_indptr_.back();
  if (s.slot_run > 0) {
    const int64_t runs = (used + s.slot_run - 1) / s.slot_run;
    std::vector<int64_t> order(static_cast<size_t>(runs));
    std::iota(order.begin(), order.end(), int64_t(0));
    for (int64_t k = runs - 1; k > 0; --k) std::swap(order[size_t(k)], order[size_t(rng.range(0, k))]);
    std::vector<int64_t> run_start(static_cast<size_t>(runs));
    int64_t next = 0;
    for (int64_t run : order) {
      next += rng.range(0, 2);
      run_start[size_t(run)] = next;
      next += std::min(s.slot_run, used - run * s.slot_run);
    }
    num_slots_ = s.num_slots > 0 ? s.num_slots : next + s.spare_slots;
    if (num_slots_ < next) {
      std::fprintf(stderr, "PagedSpec: num_slots %lld below the slot runs' %lld\n", static_cast<long long>(num_slots_),
                   static_cast<long long>(next));
      std::exit(1);
    }
    indices_.resize(size_t(used));
    for (int64_t k = 0; k < used; ++k) indices_[size_t(k)] = run_start[size_t(k / s.slot_run)] + k % s.slot_run;
  } else {
    num_slots_ = s.num_slots > 0 ? s.num_slots : used + s.spare_slots;
    std::vector<int64_t> perm(static_cast<size_t>(num_slots_));
    std::iota(perm.begin(), perm.end(), int64_t(0));
    for (int64_t k = 0; k < used; ++k) std::swap(perm[k], perm[k + rng.range(0, num_slots_ - 1 - k)]);
    indices_.assign(perm.begin(), perm.begin() + used);
  }

  const size_t kv_bytes = dtype_bytes(s.kv_dtype);
  kv_cache_.assign(size_t(num_slots_) * kDim * kv_bytes, 0);
  for (int64_t slot = 0; slot < num_slots_; ++slot)
    for (int d = 0; d < kDim; ++d) encode_nan(s.kv_dtype, kv_cache_.data(), size_t(slot) * kDim + d);
  auto fill_row = [&](uint8_t* base, size_t row) {
    for (int d = 0; d < kDim; ++d) {
      float value = d >= kDimLatent ? rng.uniform(-2.0f, 2.0f)
                    : s.value_dim   ? s.value_dim(d)
                    : s.ones_values ? 1.0f
                                    : rng.uniform(-2.0f, 2.0f);
      encode(value, s.kv_dtype, base, row * kDim + d, s.kv_scale);
    }
  };
  for (int64_t k = 0; k < used; ++k) fill_row(kv_cache_.data(), size_t(indices_[k]));
  for (const auto& o : s.index_overrides) {
    indices_[size_t(o.first)] = o.second;
    // A slot a test points at on purpose (SGLang's dummy slot 0) holds data, not poison.
    if (o.second >= 0 && o.second < num_slots_) fill_row(kv_cache_.data(), size_t(o.second));
  }

  const int64_t rows = std::max<int64_t>(total_q_, 1);
  tail_kv_.assign(size_t(rows) * kDim * kv_bytes, 0);
  for (int64_t t = 0; t < rows; ++t) fill_row(tail_kv_.data(), size_t(t));
  q_.assign(size_t(rows) * s.num_heads * kDim * dtype_bytes(s.q_dtype), 0);
  for (size_t e = 0; e < size_t(rows) * s.num_heads * kDim; ++e)
    encode(rng.uniform(-2.0f, 2.0f), s.q_dtype, q_.data(), e);
  if (s.key_rope0) {
    for (int b = 0; b < batch; ++b) {
      for (int64_t j = 0; j < kv_indptr_[b + 1] - kv_indptr_[b]; ++j) {
        const int64_t slot_id = indices_[size_t(kv_indptr_[b] + j)];
        if (slot_id < 0 || slot_id >= num_slots_) continue;  // an override: nothing to set
        const size_t slot = size_t(slot_id);
        for (int d = kDimLatent; d < kDim; ++d)
          encode(d == kDimLatent ? s.key_rope0(j) : 0.0f, s.kv_dtype, kv_cache_.data(), slot * kDim + d, s.kv_scale);
      }
    }
    for (size_t e = 0; e < size_t(rows) * s.num_heads * kDim; ++e) {
      const int d = int(e % kDim);
      if (d >= kDimLatent) encode(d == kDimLatent ? 1.0f : 0.0f, s.q_dtype, q_.data(), e);
    }
  }

  // Masks in the three encodings of SPEC section 2.
  mask_row_bytes_ = (max_q_len_ + 7) / 8;
  mask_.clear();
  mask_indptr_.assign(batch + 1, 0);
  for (int b = 0; b < batch; ++b) {
    const int q = s.q_lens[b];
    const std::vector<uint8_t> tree = b < int(s.trees.size()) ? s.trees[b] : random_tree(rng, q);
    const int64_t prefix = s.prefixes[b];
    switch (s.mask_kind) {
      case KDTREE_MASK_TREE_DENSE:
        mask_.insert(mask_.end(), tree.begin(), tree.end());
        break;
      case KDTREE_MASK_TREE_BITS: {
        std::vector<uint8_t> bits(size_t(q) * mask_row_bytes_, 0);
        for (int i = 0; i < q; ++i)
          for (int j = 0; j < q; ++j)
            // A request longer than max_q_len (a bad-indptr test) does not fit the
            // rows: it is never read, so its bits past the row are dropped.
            if (tree[size_t(i) * q + j] && j / 8 < mask_row_bytes_)
              bits[size_t(i) * mask_row_bytes_ + j / 8] |= uint8_t(1u << (j % 8));
        mask_.insert(mask_.end(), bits.begin(), bits.end());
        break;
      }
      case KDTREE_MASK_SGLANG_FULL: {
        // Prefix columns stay 0: a kernel that read them would hide the prefix.
        std::vector<uint8_t> full(size_t(q) * (prefix + q), 0);
        for (int i = 0; i < q; ++i)
          for (int j = 0; j < q; ++j) full[size_t(i) * (prefix + q) + prefix + j] = tree[size_t(i) * q + j];
        mask_.insert(mask_.end(), full.begin(), full.end());
        break;
      }
      default:
        break;
    }
    mask_indptr_[b + 1] = int64_t(mask_.size());
  }
}

void PagedProblem::upload() {
  const PagedSpec& s = spec_;
  const int64_t rows = std::max<int64_t>(total_q_, 1);
  const size_t index_bytes = dtype_bytes(s.index_dtype);
  ensure_capacity(d_q_, q_.size());
  ensure_capacity(d_kv_cache_, std::max<size_t>(kv_cache_.size(), size_t(s.reserve_slots) * kDim * dtype_bytes(s.kv_dtype)));
  ensure_capacity(d_tail_kv_, tail_kv_.size());
  ensure_capacity(d_qo_indptr_, qo_indptr_.size() * 4);
  ensure_capacity(d_kv_indptr_, kv_indptr_.size() * 4);
  ensure_capacity(d_indices_, std::max<size_t>(indices_.size(), size_t(s.reserve_indices)) * index_bytes);
  ensure_capacity(d_mask_, std::max<size_t>(mask_.size(), size_t(s.reserve_mask_bytes)));
  ensure_capacity(d_mask_indptr_, mask_indptr_.size() * 8);
  ensure_capacity(d_out_, size_t(rows) * out_token_bytes());
  ensure_capacity(d_lse_, size_t(rows) * s.num_heads * 4);
  ensure_capacity(d_flag_, 4);

  d_q_.upload(q_);
  d_kv_cache_.upload(kv_cache_);
  d_tail_kv_.upload(tail_kv_);
  d_qo_indptr_.upload(qo_indptr_);
  d_kv_indptr_.upload(kv_indptr_);
  if (s.index_dtype == KDTREE_DTYPE_INT64) {
    d_indices_.upload(indices_);
  } else {
    std::vector<int32_t> narrow(indices_.begin(), indices_.end());
    d_indices_.upload(narrow);
  }
  d_mask_.upload(mask_);
  d_mask_indptr_.upload(mask_indptr_);
}

kdtree_verify_paged_params PagedProblem::common_params() const {
  const PagedSpec& s = spec_;
  kdtree_verify_paged_params p;
  KDTREE_CHECK(kdtree_verify_paged_params_init(&p));
  p.batch_size = int32_t(s.q_lens.size());
  p.num_heads = s.num_heads;
  p.max_q_len = max_q_len_;
  p.total_q = total_q_;
  p.max_kv_len = max_kv_len_;
  p.sm_scale = sm_scale_;
  p.q_dtype = s.q_dtype;
  p.q_stride_token = int64_t(s.num_heads) * kDim;
  p.q_stride_head = kDim;
  p.kv_dtype = s.kv_dtype;
  p.kv_scale = s.kv_scale;
  p.kv_stride_slot = kDim;
  p.num_slots = num_slots_;
  p.index_dtype = s.index_dtype;
  p.tail_source = s.tail_source;
  p.tail_kv_stride = kDim;
  p.mask_kind = s.mask_kind;
  p.mask_row_bytes = mask_row_bytes_;
  p.out_dtype = s.out_dtype;
  p.out_stride_token = int64_t(s.num_heads) * kDimLatent;  // dense (run_host's f32 rows)
  p.out_stride_head = kDimLatent;
  return p;
}

size_t PagedProblem::out_head_bytes() const {
  return size_t(kDimLatent) * dtype_bytes(spec_.out_dtype) + size_t(spec_.out_pad_bytes);
}
size_t PagedProblem::out_token_bytes() const {
  return size_t(spec_.num_heads) * out_head_bytes() + size_t(spec_.out_pad_bytes);
}

PagedResult PagedProblem::run_host() const {
  const int64_t rows = std::max<int64_t>(total_q_, 1);
  PagedResult r;
  r.out.assign(size_t(rows) * spec_.num_heads * kDimLatent, std::nanf(""));
  r.lse.assign(size_t(rows) * spec_.num_heads, std::nanf(""));
  // One unread trailing entry: kv_indices is a required pointer even when no
  // request has a prefix (an empty vector's data() may be NULL).
  std::vector<int64_t> wide(indices_.begin(), indices_.end());
  wide.push_back(-1);
  std::vector<int32_t> narrow(wide.begin(), wide.end());
  kdtree_verify_paged_params p = common_params();
  p.q = q_.data();
  p.kv_cache = kv_cache_.data();
  p.qo_indptr = qo_indptr_.data();
  p.kv_indptr = kv_indptr_.data();
  p.kv_indices = spec_.index_dtype == KDTREE_DTYPE_INT64 ? static_cast<const void*>(wide.data())
                                                         : static_cast<const void*>(narrow.data());
  p.tail_kv = tail_kv_.data();
  p.mask = mask_.data();
  p.mask_indptr = mask_indptr_.data();
  p.out = r.out.data();
  p.out_dtype = KDTREE_DTYPE_F32;
  p.lse = r.lse.data();
  p.error_flag = &r.flag;
  KDTREE_CHECK(kdtree_verify_paged_host(&p));
  return r;
}

kdtree_verify_paged_params PagedProblem::device_params(int num_splits) const {
  kdtree_verify_paged_params p = common_params();
  p.num_splits = num_splits;
  p.q = d_q_.data();
  p.kv_cache = d_kv_cache_.data();
  p.qo_indptr = d_qo_indptr_.as<int32_t>();
  p.kv_indptr = d_kv_indptr_.as<int32_t>();
  p.kv_indices = d_indices_.data();
  p.tail_kv = d_tail_kv_.data();
  p.mask = d_mask_.as<uint8_t>();
  p.mask_indptr = d_mask_indptr_.as<int64_t>();
  p.out = d_out_.data();
  p.out_stride_token = int64_t(out_token_bytes() / dtype_bytes(spec_.out_dtype));  // with out_pad_bytes
  p.out_stride_head = int64_t(out_head_bytes() / dtype_bytes(spec_.out_dtype));
  p.lse = d_lse_.as<float>();
  p.error_flag = d_flag_.as<int32_t>();
  return p;
}

size_t PagedProblem::workspace_bytes(int num_splits) const {
  kdtree_verify_paged_params p = device_params(num_splits);
  size_t bytes = 0;
  KDTREE_CHECK(kdtree_verify_workspace_size(&p, &bytes));
  return bytes;
}

void PagedProblem::reset_outputs(cudaStream_t stream) {
  CUDA_CHECK(cudaMemsetAsync(d_out_.data(), kOutputSentinel, d_out_.size(), stream));
  CUDA_CHECK(cudaMemsetAsync(d_lse_.data(), kOutputSentinel, d_lse_.size(), stream));
  CUDA_CHECK(cudaMemsetAsync(d_flag_.data(), 0, 4, stream));
}

void PagedProblem::enqueue(Entry entry, int num_splits, cudaStream_t stream) {
  kdtree_verify_paged_params p = device_params(num_splits);
  if (entry == Entry::kOracle) {
    KDTREE_CHECK(kdtree_verify_paged_reference(&p, stream));
    return;
  }
  size_t bytes = workspace_bytes(num_splits);
  // Grow outside of any capture: callers capturing a graph run once eagerly first.
  if (bytes > d_workspace_.size()) d_workspace_ = DeviceBuffer(bytes);
  KDTREE_CHECK(kdtree_verify_paged(&p, d_workspace_.data(), d_workspace_.size(), stream));
}

PagedResult PagedProblem::collect() const {
  PagedResult r;
  r.out_bytes = d_out_.download();
  r.lse_bytes = d_lse_.download();
  std::vector<uint8_t> flag = d_flag_.download();
  std::memcpy(&r.flag, flag.data(), 4);
  r.guards_ok = d_out_.guards_intact() && d_lse_.guards_intact() && d_flag_.guards_intact();

  // out decoded to [token][head][512]; its padding (out_pad_bytes) must
  // still hold the sentinel.
  const int H = spec_.num_heads;
  const size_t head_bytes = out_head_bytes(), token_bytes = out_token_bytes();
  const size_t value_bytes = size_t(kDimLatent) * dtype_bytes(spec_.out_dtype);
  const size_t out_rows = r.out_bytes.size() / token_bytes;
  r.out.resize(out_rows * H * kDimLatent);
  for (size_t t = 0; t < out_rows; ++t) {
    const uint8_t* token = r.out_bytes.data() + t * token_bytes;
    for (int h = 0; h < H; ++h) {
      for (int d = 0; d < kDimLatent; ++d)
        r.out[(t * H + h) * kDimLatent + d] = decode(token + h * head_bytes, d, spec_.out_dtype);
      for (size_t k = value_bytes; k < head_bytes; ++k)
        if (token[h * head_bytes + k] != kOutputSentinel) r.untouched_ok = false;
    }
    for (size_t k = H * head_bytes; k < token_bytes; ++k)
      if (token[k] != kOutputSentinel) r.untouched_ok = false;
  }
  r.lse.resize(r.lse_bytes.size() / 4);
  std::memcpy(r.lse.data(), r.lse_bytes.data(), r.lse.size() * 4);

  const size_t lse_row_bytes = size_t(spec_.num_heads) * 4;
  for (int64_t t = qo_indptr_.back(); t < total_q_; ++t) {
    for (size_t k = 0; k < token_bytes; ++k)
      if (r.out_bytes[size_t(t) * token_bytes + k] != kOutputSentinel) r.untouched_ok = false;
    for (size_t k = 0; k < lse_row_bytes; ++k)
      if (r.lse_bytes[size_t(t) * lse_row_bytes + k] != kOutputSentinel) r.untouched_ok = false;
  }
  return r;
}

PagedResult PagedProblem::run_device(Entry entry, int num_splits, cudaStream_t stream) {
  reset_outputs(stream);
  enqueue(entry, num_splits, stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  CUDA_CHECK(cudaGetLastError());
  return collect();
}

Comparison PagedProblem::compare(const PagedResult& got, const PagedResult& reference) const {
  Comparison c;
  const int64_t rows = qo_indptr_.back();
  const size_t values = size_t(rows) * spec_.num_heads * kDimLatent;
  double diff = 0.0, norm = 0.0;
  for (size_t e = 0; e < values; ++e) {
    double g = got.out[e], r = reference.out[e];
    if (std::isnan(g)) {
      ++c.nan_count;
      continue;
    }
    diff += (g - r) * (g - r);
    norm += r * r;
  }
  c.rel_frobenius = norm > 0.0 ? std::sqrt(diff / norm) : std::sqrt(diff);
  for (size_t e = 0; e < size_t(rows) * spec_.num_heads; ++e) {
    float g = got.lse[e], r = reference.lse[e];
    if (std::isnan(g)) {
      ++c.nan_count;
    } else if (std::isinf(r) || std::isinf(g)) {
      if (g != r) c.inf_mismatch = true;
    } else {
      c.lse_abs = std::max(c.lse_abs, double(std::fabs(g - r)));
    }
  }
  return c;
}

bool within_bars(const Comparison& c, double max_rel_frobenius, double max_lse_abs) {
  return c.nan_count == 0 && !c.inf_mismatch && c.rel_frobenius <= max_rel_frobenius &&
         c.lse_abs <= max_lse_abs;
}

}  // namespace kdtest
