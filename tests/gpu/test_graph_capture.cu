// Every device entry point of the verify / merge family is legal inside
// cudaStreamBeginCapture(..., cudaStreamCaptureModeGlobal), and a replay
// equals an eager call bitwise. For the paged entry points the buffers are
// then refilled with new lengths, indices and masks (same host fields:
// batch size, max_q_len, total_q, H, num_slots, sm_scale, max_kv_len) and
// the same graph, replayed, must equal an eager call on the new contents;
// the contiguous and merge graphs (whose sizes are all host fields) are
// replayed over two fills of new values, out and lse poisoned first.
// Under a sanitizer (light mode): one refill instead of two, prefixes up to
// 600 instead of 3000, a contiguous case of 16 + 250 keys instead of 16 + 1000.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/gpu_test.hpp"
#include "common/paged_problem.hpp"

using namespace kdtest;

namespace {

// Captures `enqueue` on a fresh non-blocking stream in global mode.
template <class Enqueue>
cudaGraphExec_t capture(cudaStream_t stream, Enqueue enqueue) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  enqueue();
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_CHECK(cudaGraphDestroy(graph));
  return exec;
}

// Captures `call` (which poisons out and lse, then enqueues one entry point)
// and, over two fills of new inputs (`refill` uploads them), checks that the
// replay equals an eager call bitwise in out and lse: the graph reads the
// buffers' contents at each replay.
template <class Refill, class Call>
void replay_over_fills(Report& report, const std::string& what, cudaStream_t stream, Refill refill, Call call,
                       const DeviceBuffer& out, const DeviceBuffer& lse) {
  cudaGraphExec_t exec = capture(stream, call);
  for (int fill = 0; fill < 2; ++fill) {
    refill();
    call();
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::vector<uint8_t> eager = out.download(), eager_lse = lse.download();
    report.check(eager != std::vector<uint8_t>(eager.size(), kOutputSentinel),
                 what + " fill " + std::to_string(fill) + ": the eager call wrote no output");
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    report.add_case();
    report.check(out.download() == eager && lse.download() == eager_lse,
                 what + " fill " + std::to_string(fill) + ": replay differs from eager");
  }
  CUDA_CHECK(cudaGraphExecDestroy(exec));
}

PagedSpec graph_spec(Rng& rng, int32_t mask_kind, int32_t tail_source) {
  // Host bounds shared by every refill: B = 3, max_q_len = 32, total_q = 40.
  const int64_t max_prefix = scaled<int64_t>(3000, 600);
  PagedSpec s;
  const int q0 = int(rng.range(1, 32));
  const int q1 = int(rng.range(1, std::min(32, 40 - q0 - 1)));
  const int q2 = int(rng.range(0, std::min(32, 40 - q0 - q1)));
  s.q_lens = {q0, q1, q2};
  s.extra_rows = 40 - q0 - q1 - q2;
  s.prefixes = {rng.range(0, max_prefix), rng.range(0, max_prefix), rng.range(0, max_prefix)};
  s.max_q_len = 32;
  s.num_heads = 16;
  s.mask_kind = mask_kind;
  s.tail_source = tail_source;
  s.num_slots = 3 * (max_prefix + 32) + 50;
  s.max_kv_len = max_prefix + 32;
  s.sm_scale = 0.05f;
  s.reserve_indices = 3 * (max_prefix + 32);
  s.reserve_mask_bytes = 3 * 32 * (max_prefix + 32);
  return s;
}

void paged_replay(Report& report, Entry entry, int num_splits, int32_t mask_kind, int32_t tail_source, Rng& rng) {
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  PagedProblem problem(graph_spec(rng, mask_kind, tail_source), rng);
  problem.run_device(entry, num_splits, stream);  // sizes the workspace outside the capture
  cudaGraphExec_t exec = capture(stream, [&] {
    problem.reset_outputs(stream);
    problem.enqueue(entry, num_splits, stream);
  });
  const std::string what = std::string(entry_name(entry)) + " splits=" + std::to_string(num_splits) +
                           " mask=" + std::to_string(mask_kind) + " tail=" + std::to_string(tail_source);
  const int fills = scaled(3, 2);  // the first fill, then refills
  for (int refill = 0; refill < fills; ++refill) {
    if (refill > 0) problem.refill(graph_spec(rng, mask_kind, tail_source), rng);
    PagedResult eager = problem.run_device(entry, num_splits, stream);
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    PagedResult replay = problem.collect();
    Comparison c = problem.compare(replay, problem.run_host());
    report.add_case();
    report.error(c.rel_frobenius);
    report.check(replay.out_bytes == eager.out_bytes && replay.lse_bytes == eager.lse_bytes && replay.flag == eager.flag,
                 what + " refill " + std::to_string(refill) + ": replay differs from eager");
    report.check(within_bars(c), what + " refill " + std::to_string(refill) + ": replay off the reference");
  }
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaStreamDestroy(stream));
}

void contiguous_replay(Report& report, Rng& rng) {
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const int q_len = 16, heads = 16;
  const int64_t kv_len = 16 + scaled<int64_t>(1000, 250);
  std::vector<float> q(size_t(q_len) * heads * 576), kv(size_t(kv_len) * 576);
  DeviceBuffer d_q(q.size() * 4), d_kv(kv.size() * 4), d_out(size_t(q_len) * heads * 512 * 4), d_lse(size_t(q_len) * heads * 4);
  kdtree_verify_contiguous_params p;
  KDTREE_CHECK(kdtree_verify_contiguous_params_init(&p));
  p.num_heads = heads;
  p.q_len = q_len;
  p.dtype = KDTREE_DTYPE_F32;
  p.kv_len = kv_len;
  p.sm_scale = 0.04f;
  p.mask_kind = KDTREE_MASK_CAUSAL;
  p.q = d_q.data();
  p.q_stride_token = int64_t(heads) * 576;
  p.q_stride_head = 576;
  p.kv = d_kv.data();
  p.kv_stride = 576;
  p.out = d_out.data();
  p.out_dtype = KDTREE_DTYPE_F32;
  p.out_stride_token = int64_t(heads) * 512;
  p.out_stride_head = 512;
  p.lse = d_lse.as<float>();
  const auto poison_and_call = [&] {
    CUDA_CHECK(cudaMemsetAsync(d_out.data(), kOutputSentinel, d_out.size(), stream));
    CUDA_CHECK(cudaMemsetAsync(d_lse.data(), kOutputSentinel, d_lse.size(), stream));
    KDTREE_CHECK(kdtree_verify_contiguous(&p, stream));
  };
  const auto refill = [&] {
    for (float& x : q) x = rng.uniform(-2.0f, 2.0f);
    for (float& x : kv) x = rng.uniform(-2.0f, 2.0f);
    d_q.upload(q);
    d_kv.upload(kv);
  };
  replay_over_fills(report, "kdtree_verify_contiguous", stream, refill, poison_and_call, d_out, d_lse);
  CUDA_CHECK(cudaStreamDestroy(stream));
}

void merge_replay(Report& report, Rng& rng) {
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const int states = 6, heads = 16, dim = 512;
  const int64_t tokens = 33;
  std::vector<float> values(size_t(states) * tokens * heads * dim), lse(size_t(states) * tokens * heads);
  DeviceBuffer d_values(values.size() * 4), d_lse(lse.size() * 4), d_out(size_t(tokens) * heads * dim * 2),
      d_out_lse(size_t(tokens) * heads * 4);
  const kdtree_merge_params p = dense_merge_params(states, tokens, heads, dim, d_values.data(), d_lse.as<float>(),
                                                  d_out.data(), KDTREE_DTYPE_BF16, d_out_lse.as<float>());
  const auto poison_and_call = [&] {
    CUDA_CHECK(cudaMemsetAsync(d_out.data(), kOutputSentinel, d_out.size(), stream));
    CUDA_CHECK(cudaMemsetAsync(d_out_lse.data(), kOutputSentinel, d_out_lse.size(), stream));
    KDTREE_CHECK(kdtree_merge_attention_states(&p, stream));
  };
  const auto refill = [&] {
    for (float& x : values) x = rng.uniform(-2.0f, 2.0f);
    for (float& x : lse) x = rng.uniform(0.0f, 1.0f) < 0.1f ? -INFINITY : rng.uniform(-5.0f, 5.0f);
    d_values.upload(values);
    d_lse.upload(lse);
  };
  replay_over_fills(report, "kdtree_merge_attention_states", stream, refill, poison_and_call, d_out, d_out_lse);
  CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace

int main() {
  require_gpu_or_skip("test_graph_capture");
  KDTREE_CHECK(kdtree_prepare(0));  // kernel attributes before any capture
  Rng rng(test_seed());
  Report report("test_graph_capture");
  announce_light("test_graph_capture", "1 refill instead of 2, prefixes <= 600 instead of 3000, contiguous kv 16 + 250 instead of 16 + 1000");
  for (int32_t mask : {KDTREE_MASK_CAUSAL, KDTREE_MASK_TREE_BITS, KDTREE_MASK_SGLANG_FULL}) {
    const int32_t tail = mask == KDTREE_MASK_SGLANG_FULL ? KDTREE_TAIL_FROM_EXTEND : KDTREE_TAIL_FROM_INDICES;
    paged_replay(report, Entry::kOracle, 0, mask, tail, rng);
    paged_replay(report, Entry::kProduction, 0, mask, tail, rng);
    paged_replay(report, Entry::kProduction, 1, mask, tail, rng);
    paged_replay(report, Entry::kProduction, 8, mask, tail, rng);
  }
  contiguous_replay(report, rng);
  merge_replay(report, rng);
  return report.finish();
}
