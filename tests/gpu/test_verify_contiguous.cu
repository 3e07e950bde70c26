// kdtree_verify_contiguous against an fp64 reference written here (the paged
// host reference takes no f32 KV): f32 in and out within 1e-5 relative
// Frobenius, bf16 anywhere within 5e-3; lse within 1e-3 (1e-5 for f32).
// Canaries around out and lse must survive. Under a sanitizer (light mode)
// the grid's random kv tails reach 200 keys instead of 700 and the long case
// has a 1024-key prefix instead of 4096; every mask / dtype case still runs.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/gpu_test.hpp"
#include "common/paged_problem.hpp"

using namespace kdtest;

namespace {

constexpr int kDimLatent = 512;
constexpr int kDim = 576;

struct ContiguousCase {
  int q_len, num_heads;
  int64_t kv_len;
  int32_t mask_kind, dtype, out_dtype;
};

bool visible(const ContiguousCase& c, const std::vector<uint8_t>& tree, int i, int64_t row) {
  const int64_t prefix = c.kv_len - c.q_len;
  if (row < prefix) return true;
  const int64_t j = row - prefix;
  switch (c.mask_kind) {
    case KDTREE_MASK_NONE:
      return true;
    case KDTREE_MASK_CAUSAL:
      return j <= i;
    default:
      return tree[size_t(i) * c.q_len + size_t(j)] != 0;
  }
}

void run_case(Report& report, const ContiguousCase& c, Rng& rng) {
  const size_t in_bytes = dtype_bytes(c.dtype), out_bytes = dtype_bytes(c.out_dtype);
  std::vector<uint8_t> q(size_t(c.q_len) * c.num_heads * kDim * in_bytes);
  std::vector<uint8_t> kv(size_t(c.kv_len) * kDim * in_bytes);
  for (size_t e = 0; e < q.size() / in_bytes; ++e) encode(rng.uniform(-2.0f, 2.0f), c.dtype, q.data(), e);
  for (size_t e = 0; e < kv.size() / in_bytes; ++e) encode(rng.uniform(-2.0f, 2.0f), c.dtype, kv.data(), e);
  const std::vector<uint8_t> tree = random_tree(rng, c.q_len);
  const int64_t row_bytes = (c.q_len + 7) / 8;
  std::vector<uint8_t> mask;
  if (c.mask_kind == KDTREE_MASK_TREE_DENSE) mask = tree;
  if (c.mask_kind == KDTREE_MASK_TREE_BITS) {
    mask.assign(size_t(c.q_len) * row_bytes, 0);
    for (int i = 0; i < c.q_len; ++i)
      for (int j = 0; j < c.q_len; ++j)
        if (tree[size_t(i) * c.q_len + j]) mask[size_t(i) * row_bytes + j / 8] |= uint8_t(1u << (j % 8));
  }
  const float sm_scale = 1.0f / std::sqrt(float(kDim));

  DeviceBuffer d_q(q.size()), d_kv(kv.size()), d_mask(std::max<size_t>(mask.size(), 1));
  DeviceBuffer d_out(size_t(c.q_len) * c.num_heads * kDimLatent * out_bytes), d_lse(size_t(c.q_len) * c.num_heads * 4);
  d_q.upload(q);
  d_kv.upload(kv);
  d_mask.upload(mask);
  d_out.fill(kOutputSentinel);

  kdtree_verify_contiguous_params p;
  KDTREE_CHECK(kdtree_verify_contiguous_params_init(&p));
  p.num_heads = c.num_heads;
  p.q_len = c.q_len;
  p.dtype = c.dtype;
  p.kv_len = c.kv_len;
  p.sm_scale = sm_scale;
  p.mask_kind = c.mask_kind;
  p.q = d_q.data();
  p.q_stride_token = int64_t(c.num_heads) * kDim;
  p.q_stride_head = kDim;
  p.kv = d_kv.data();
  p.kv_stride = kDim;
  p.mask = d_mask.as<uint8_t>();
  p.mask_row_bytes = row_bytes;
  p.out = d_out.data();
  p.out_dtype = c.out_dtype;
  p.out_stride_token = int64_t(c.num_heads) * kDimLatent;
  p.out_stride_head = kDimLatent;
  p.lse = d_lse.as<float>();
  KDTREE_CHECK(kdtree_verify_contiguous(&p, nullptr));
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint8_t> out = d_out.download(), lse_bytes = d_lse.download();
  std::vector<float> lse(lse_bytes.size() / 4);
  std::memcpy(lse.data(), lse_bytes.data(), lse_bytes.size());

  // fp64 reference, two-pass softmax, on inputs decoded once.
  std::vector<double> qd(q.size() / in_bytes), kvd(kv.size() / in_bytes);
  for (size_t e = 0; e < qd.size(); ++e) qd[e] = decode(q.data(), e, c.dtype);
  for (size_t e = 0; e < kvd.size(); ++e) kvd[e] = decode(kv.data(), e, c.dtype);
  double diff = 0.0, norm = 0.0, lse_err = 0.0;
  bool nan_or_inf = false;
  std::vector<double> score(size_t(c.kv_len));
  for (int i = 0; i < c.q_len; ++i) {
    for (int h = 0; h < c.num_heads; ++h) {
      const double* q_row = &qd[(size_t(i) * c.num_heads + h) * kDim];
      double max = -INFINITY;
      for (int64_t r = 0; r < c.kv_len; ++r) {
        if (!visible(c, tree, i, r)) { score[r] = -INFINITY; continue; }
        const double* k_row = &kvd[size_t(r) * kDim];
        double dot = 0.0;
        for (int d = 0; d < kDim; ++d) dot += q_row[d] * k_row[d];
        score[r] = dot * sm_scale;
        max = std::max(max, score[r]);
      }
      double sum = 0.0;
      std::vector<double> acc(kDimLatent, 0.0);
      for (int64_t r = 0; r < c.kv_len; ++r) {
        if (score[r] == -INFINITY) continue;
        double w = std::exp(score[r] - max);
        sum += w;
        for (int d = 0; d < kDimLatent; ++d) acc[d] += w * kvd[size_t(r) * kDim + d];
      }
      const size_t out_base = (size_t(i) * c.num_heads + h) * kDimLatent;
      for (int d = 0; d < kDimLatent; ++d) {
        double want = acc[d] / sum, got = decode(out.data(), out_base + d, c.out_dtype);
        nan_or_inf |= !std::isfinite(got);
        diff += (got - want) * (got - want);
        norm += want * want;
      }
      const double got_lse = lse[size_t(i) * c.num_heads + h];
      nan_or_inf |= !std::isfinite(got_lse);  // every row sees its own key (std::max would drop a NaN)
      lse_err = std::max(lse_err, std::fabs(got_lse - (max + std::log(sum))));
    }
  }
  const bool exact_path = c.dtype == KDTREE_DTYPE_F32 && c.out_dtype == KDTREE_DTYPE_F32;
  const double rel = std::sqrt(diff / norm);
  report.add_case();
  report.error(rel);
  char what[200];
  std::snprintf(what, sizeof what, "contiguous q_len=%d H=%d kv_len=%lld mask=%d in=%d out=%d: rel %.3g lse %.3g",
                c.q_len, c.num_heads, static_cast<long long>(c.kv_len), c.mask_kind, c.dtype, c.out_dtype, rel,
                lse_err);
  report.check(!nan_or_inf && rel <= (exact_path ? 1e-5 : 5e-3) && lse_err <= (exact_path ? 1e-5 : 1e-3), what);
  report.check(d_out.guards_intact() && d_lse.guards_intact(), std::string(what) + ": canary changed");
}

}  // namespace

int main() {
  require_gpu_or_skip("test_verify_contiguous");
  Rng rng(test_seed());
  Report report("test_verify_contiguous");
  announce_light("test_verify_contiguous", "kv tails <= 200 keys instead of 700, long prefix 1024 instead of 4096");
  const int64_t max_tail = scaled<int64_t>(700, 200), long_prefix = scaled<int64_t>(4096, 1024);
  for (int32_t mask : {KDTREE_MASK_NONE, KDTREE_MASK_CAUSAL, KDTREE_MASK_TREE_DENSE, KDTREE_MASK_TREE_BITS})
    for (int32_t dtype : {KDTREE_DTYPE_F32, KDTREE_DTYPE_BF16})
      for (int32_t out : {KDTREE_DTYPE_F32, KDTREE_DTYPE_BF16}) {
        int q_len = int(rng.range(1, 24));
        run_case(report,
                 {q_len, int(rng.pick(std::vector<int>{1, 8, 16})), q_len + rng.range(0, max_tail), mask, dtype, out},
                 rng);
      }
  run_case(report, {128, 8, 128 + 300, KDTREE_MASK_TREE_BITS, KDTREE_DTYPE_F32, KDTREE_DTYPE_F32}, rng);
  run_case(report, {4, 128, 4 + 64, KDTREE_MASK_CAUSAL, KDTREE_DTYPE_BF16, KDTREE_DTYPE_BF16}, rng);
  run_case(report, {16, 16, 16 + long_prefix, KDTREE_MASK_TREE_DENSE, KDTREE_DTYPE_F32, KDTREE_DTYPE_F32}, rng);
  run_case(report, {1, 1, 1, KDTREE_MASK_NONE, KDTREE_DTYPE_F32, KDTREE_DTYPE_F32}, rng);
  return report.finish();
}
