// kdtree_merge_attention_states against its host twin
// (kdtree_merge_attention_states_host): f32 out within 1e-5 relative
// Frobenius, bf16 / fp16 out within 5e-3, lse within 1e-5. Empty states
// (lse -inf) hold NaN and must not leak; one row has every state empty. Two
// runs of the same inputs are bitwise equal. Under a sanitizer (light mode)
// the grid draws 1-8 tokens instead of 1-40 and the 64-state case has 17
// tokens instead of 257; every dtype pair and head_dim still runs.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/gpu_test.hpp"

using namespace kdtest;

namespace {

struct MergeCase {
  int num_states, num_heads, head_dim;
  int64_t num_tokens;
  int32_t states_dtype, out_dtype;
  int64_t head_pad;  // extra elements between heads (strides stay 16-byte friendly)
};

void run_case(Report& report, const MergeCase& c, Rng& rng) {
  const int64_t head_stride = c.head_dim + c.head_pad;
  const int64_t token_stride = head_stride * c.num_heads;
  const int64_t state_stride = token_stride * c.num_tokens;
  const size_t rows = size_t(c.num_tokens) * c.num_heads;
  std::vector<float> lse(size_t(c.num_states) * rows);
  for (size_t e = 0; e < lse.size(); ++e) lse[e] = rng.uniform(0.0f, 1.0f) < 0.2f ? -INFINITY : rng.uniform(-8.0f, 8.0f);
  for (int s = 0; s < c.num_states; ++s) lse[size_t(s) * rows] = -INFINITY;  // row 0: nothing visible
  std::vector<uint8_t> states(size_t(c.num_states) * state_stride * dtype_bytes(c.states_dtype));
  for (int s = 0; s < c.num_states; ++s)
    for (size_t row = 0; row < rows; ++row)
      for (int64_t d = 0; d < head_stride; ++d) {
        size_t index = size_t(s) * state_stride + row * head_stride + d;
        if (lse[size_t(s) * rows + row] == -INFINITY || d >= c.head_dim) {
          encode_nan(c.states_dtype, states.data(), index);
        } else {
          encode(rng.uniform(-3.0f, 3.0f), c.states_dtype, states.data(), index);
        }
      }

  kdtree_merge_params p;
  KDTREE_CHECK(kdtree_merge_params_init(&p));
  p.num_states = c.num_states;
  p.num_tokens = c.num_tokens;
  p.num_heads = c.num_heads;
  p.head_dim = c.head_dim;
  p.states_dtype = c.states_dtype;
  p.states_stride_state = state_stride;
  p.states_stride_token = token_stride;
  p.states_stride_head = head_stride;
  p.out_dtype = c.out_dtype;
  p.out_stride_token = int64_t(c.num_heads) * c.head_dim;
  p.out_stride_head = c.head_dim;

  // Host twin, f32 out.
  std::vector<float> want(rows * c.head_dim), want_lse(rows);
  kdtree_merge_params host = p;
  host.states = states.data();
  host.states_lse = lse.data();
  host.out = want.data();
  host.out_dtype = KDTREE_DTYPE_F32;
  host.lse = want_lse.data();
  KDTREE_CHECK(kdtree_merge_attention_states_host(&host));

  DeviceBuffer d_states(states.size()), d_lse(lse.size() * 4);
  DeviceBuffer d_out(rows * c.head_dim * dtype_bytes(c.out_dtype)), d_out_lse(rows * 4);
  d_states.upload(states);
  d_lse.upload(lse);
  p.states = d_states.data();
  p.states_lse = d_lse.as<float>();
  p.out = d_out.data();
  p.lse = d_out_lse.as<float>();
  std::vector<uint8_t> first;
  for (int repeat = 0; repeat < 2; ++repeat) {
    d_out.fill(kOutputSentinel);
    KDTREE_CHECK(kdtree_merge_attention_states(&p, nullptr));
    CUDA_CHECK(cudaDeviceSynchronize());
    if (repeat == 0) first = d_out.download();
  }
  std::vector<uint8_t> out = d_out.download(), lse_bytes = d_out_lse.download();
  std::vector<float> got_lse(rows);
  std::memcpy(got_lse.data(), lse_bytes.data(), rows * 4);

  double diff = 0.0, norm = 0.0, lse_err = 0.0;
  bool bad = false;
  for (size_t e = 0; e < want.size(); ++e) {
    double g = decode(out.data(), e, c.out_dtype);
    bad |= std::isnan(g);
    diff += (g - want[e]) * (g - want[e]);
    norm += double(want[e]) * want[e];
  }
  for (size_t row = 0; row < rows; ++row) {
    if (std::isnan(got_lse[row])) {
      bad = true;  // (std::max below would drop a NaN)
    } else if (std::isinf(want_lse[row]) || std::isinf(got_lse[row])) {
      bad |= got_lse[row] != want_lse[row];
    } else {
      lse_err = std::max(lse_err, double(std::fabs(got_lse[row] - want_lse[row])));
    }
  }
  for (int d = 0; d < c.head_dim; ++d) bad |= decode(out.data(), size_t(d), c.out_dtype) != 0.0f;  // row 0
  const double rel = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
  report.add_case();
  report.error(rel);
  char what[200];
  std::snprintf(what, sizeof what, "merge S=%d T=%lld H=%d d=%d states=%d out=%d pad=%lld: rel %.3g lse %.3g",
                c.num_states, static_cast<long long>(c.num_tokens), c.num_heads, c.head_dim, c.states_dtype,
                c.out_dtype, static_cast<long long>(c.head_pad), rel, lse_err);
  report.check(!bad && rel <= (c.out_dtype == KDTREE_DTYPE_F32 ? 1e-5 : 5e-3) && lse_err <= 1e-5, what);
  report.check(first == out, std::string(what) + ": two runs differ");
  report.check(d_out.guards_intact() && d_out_lse.guards_intact(), std::string(what) + ": canary changed");
}

}  // namespace

int main() {
  require_gpu_or_skip("test_merge");
  Rng rng(test_seed());
  Report report("test_merge");
  announce_light("test_merge", "1-8 tokens per grid case instead of 1-40, 64-state case 17 tokens instead of 257");
  const int64_t max_tokens = scaled<int64_t>(40, 8);
  for (int32_t states : {KDTREE_DTYPE_F32, KDTREE_DTYPE_BF16, KDTREE_DTYPE_F16})
    for (int32_t out : {KDTREE_DTYPE_F32, KDTREE_DTYPE_BF16, KDTREE_DTYPE_F16})
      for (int head_dim : {8, 64, 512, 1024}) {
        MergeCase c{int(rng.range(1, 8)), rng.pick(std::vector<int>{1, 3, 16, 128}), head_dim,
                    rng.range(1, max_tokens), states, out, rng.pick(std::vector<int64_t>{0, 8, 16})};
        run_case(report, c, rng);
      }
  run_case(report, {64, 16, 512, scaled<int64_t>(257, 17), KDTREE_DTYPE_F32, KDTREE_DTYPE_BF16, 0}, rng);
  return report.finish();
}
