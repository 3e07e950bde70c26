// The SPEC section 7 grid: kdtree_verify_paged (every num_splits tried here)
// and kdtree_verify_paged_reference against kdtree_verify_paged_host on fresh
// random inputs. Every case also checks the poison rules: unreferenced slots
// hold NaN (none may leak), canaries around out / lse and rows of no request
// stay untouched, and no flag is raised.
//
// Cost is the fp64 host reference: most cases are small; a few reach a
// 128k prefix with few heads. Under a sanitizer (light mode) the random grid
// runs a pairwise cover of its four axes (15 of 60 combinations: every
// mask kind with every kv dtype, each also meeting both tail sources and
// both index dtypes), prefixes up to 256 instead of 1024, and the long
// prefixes are cut 8x (16k and 8k/2.5k); the fixed edge cases all run (the
// strided out with fewer split counts).
#include <cstdio>
#include <string>
#include <vector>

#include "common/gpu_test.hpp"
#include "common/paged_problem.hpp"

using namespace kdtest;

namespace {

const char* kMaskNames[] = {"none", "causal", "tree_dense", "tree_bits", "sglang_full"};

std::string describe(const PagedSpec& s, Entry entry, int num_splits) {
  char text[256];
  std::snprintf(text, sizeof text, "%s splits=%d mask=%s tail=%s idx=%s kv=%d out=%d H=%d B=%zu q0=%d p0=%lld",
                entry_name(entry), num_splits, kMaskNames[s.mask_kind],
                s.tail_source == KDTREE_TAIL_FROM_INDICES ? "indices" : "extend",
                s.index_dtype == KDTREE_DTYPE_INT64 ? "i64" : "i32", s.kv_dtype, s.out_dtype, s.num_heads,
                s.q_lens.size(), s.q_lens[0], static_cast<long long>(s.prefixes[0]));
  return text;
}

// Runs the oracle and the production kernel with each of `splits` against
// the host reference.
void check_case(Report& report, const PagedSpec& spec, const std::vector<int>& splits, Rng& rng) {
  PagedProblem problem(spec, rng);
  PagedResult reference = problem.run_host();
  report.check(reference.flag == 0, describe(spec, Entry::kOracle, 0) + ": host raised a flag");
  std::vector<std::pair<Entry, int>> runs = {{Entry::kOracle, 0}};
  for (int s : splits) runs.push_back({Entry::kProduction, s});
  for (const auto& run : runs) {
    report.add_case();
    PagedResult got = problem.run_device(run.first, run.second);
    Comparison c = problem.compare(got, reference);
    report.error(c.rel_frobenius);
    std::string what = describe(spec, run.first, run.second);
    char numbers[160];
    std::snprintf(numbers, sizeof numbers, ": rel %.3g lse %.3g nan %lld inf_mismatch %d flag %d", c.rel_frobenius,
                  c.lse_abs, static_cast<long long>(c.nan_count), int(c.inf_mismatch), got.flag);
    report.check(within_bars(c), what + numbers);
    report.check(got.flag == 0, what + ": unexpected flag" + numbers);
    report.check(got.guards_ok, what + ": canary guard band changed");
    report.check(got.untouched_ok, what + ": a row of no request, or out's padding, was written");
  }
}

// Light mode's pairwise cover: with mask m (0-4) and kv dtype k (0-2) the
// tail source is (m + k) % 2 and the index dtype (m + [k == 2]) % 2, so every
// pair of values of any two axes occurs at least once.
bool in_light_cover(int mask, int tail, int index, int kv) {
  return tail == (mask + kv) % 2 && index == (mask + (kv == 2)) % 2;
}

std::vector<int> some_splits(Rng& rng) {
  return {0, 1, int(rng.range(2, 8)), rng.pick(std::vector<int>{16, 32, 64, 128})};
}

}  // namespace

int main() {
  require_gpu_or_skip("test_verify_paged_grid");
  Rng rng(test_seed());
  Report report("test_verify_paged_grid");
  announce_light("test_verify_paged_grid",
                 "15 of 60 grid combinations (pairwise cover), prefixes <= 256, long prefixes 16k and 8k, "
                 "strided out with 1 split (and 3 in bf16)");
  const int64_t grid_prefix = scaled<int64_t>(1024, 256);

  // Every mask kind x tail source x index dtype x kv dtype, small ragged batches.
  const int32_t kv_dtypes[] = {KDTREE_DTYPE_BF16, KDTREE_DTYPE_F16, KDTREE_DTYPE_FP8_E4M3};
  for (int32_t mask = KDTREE_MASK_NONE; mask <= KDTREE_MASK_SGLANG_FULL; ++mask)
    for (int tail_at = 0; tail_at < 2; ++tail_at)
      for (int index_at = 0; index_at < 2; ++index_at)
        for (int kv_at = 0; kv_at < 3; ++kv_at) {
          if (sanitizer_light() && !in_light_cover(mask, tail_at, index_at, kv_at)) continue;
          const int32_t tail = tail_at == 0 ? KDTREE_TAIL_FROM_INDICES : KDTREE_TAIL_FROM_EXTEND;
          const int32_t index = index_at == 0 ? KDTREE_DTYPE_INT32 : KDTREE_DTYPE_INT64;
          const int32_t kv = kv_dtypes[kv_at];
          PagedSpec s;
          int batch = int(rng.range(1, 3));
          for (int b = 0; b < batch; ++b) {
            s.q_lens.push_back(int(rng.range(1, 32)));
            s.prefixes.push_back(rng.range(0, grid_prefix));
          }
          s.num_heads = rng.pick(std::vector<int>{1, 6, 8, 16});  // 6: a merge block whose last heads are past H
          s.mask_kind = mask;
          s.tail_source = tail;
          s.index_dtype = index;
          s.kv_dtype = kv;
          s.q_dtype = kv == KDTREE_DTYPE_F16 ? KDTREE_DTYPE_F16 : KDTREE_DTYPE_BF16;
          s.out_dtype = rng.pick(std::vector<int32_t>{KDTREE_DTYPE_BF16, KDTREE_DTYPE_F16, KDTREE_DTYPE_F32});
          s.kv_scale = kv == KDTREE_DTYPE_FP8_E4M3 ? rng.uniform(0.01f, 0.1f) : 1.0f;
          s.extra_rows = int(rng.range(0, 3));
          check_case(report, s, some_splits(rng), rng);
        }

  // q_len at the bound (128), ragged with 1, tree mask; H = 128; max_q_len
  // larger than any request.
  {
    PagedSpec s;
    s.q_lens = {128, 1, 77};
    s.prefixes = {300, 0, 1000};
    s.num_heads = 8;
    s.mask_kind = KDTREE_MASK_TREE_BITS;
    check_case(report, s, some_splits(rng), rng);
  }
  {
    PagedSpec s;
    s.q_lens = {16, 5};
    s.prefixes = {512, 3};
    s.num_heads = 128;
    s.mask_kind = KDTREE_MASK_SGLANG_FULL;
    s.tail_source = KDTREE_TAIL_FROM_EXTEND;
    s.max_q_len = 64;
    check_case(report, s, some_splits(rng), rng);
  }
  // Partial last tiles of 16, 1 and 17 keys (2064, 1025, 1041 keys; S8's
  // request is the first), with split counts that leave the last split
  // shorter than the others (4, 5) or some splits empty (64).
  {
    PagedSpec s;
    s.q_lens = {16, 1, 17};
    s.prefixes = {2048, 1024, 1024};
    s.num_heads = 16;
    s.mask_kind = KDTREE_MASK_TREE_DENSE;
    check_case(report, s, {0, 1, 4, 5, 64}, rng);
  }
  // Long prefixes: few cases, few heads (the host reference is the cost).
  {
    PagedSpec s;  // S1-like: one 128k-token EAGLE tree
    s.q_lens = {16};
    s.prefixes = {scaled<int64_t>(131072, 16384)};
    s.num_heads = 16;
    s.mask_kind = KDTREE_MASK_TREE_DENSE;
    check_case(report, s, {0, 1, 64}, rng);
  }
  {
    PagedSpec s;
    s.q_lens = {8, 3};
    s.prefixes = scaled<std::vector<int64_t>>({65536, 20000}, {8192, 2500});
    s.num_heads = 1;
    s.kv_dtype = KDTREE_DTYPE_FP8_E4M3;
    s.kv_scale = 0.05f;
    s.index_dtype = KDTREE_DTYPE_INT64;
    s.mask_kind = KDTREE_MASK_CAUSAL;
    s.out_dtype = KDTREE_DTYPE_F32;
    check_case(report, s, {0, 3, 128}, rng);
  }
  // S3-like (two row tiles a request, 16 auto splits of 65 tiles on an H200's
  // 132 SMs): the sm_90a ping-pong's lead plan, 16 lead splits of 63 tiles
  // and a last split of the rest, on ragged lengths (the shorter requests
  // leave lead splits and the last split empty); 16 splits evenly beside it.
  // Then the same in fp8 KV (which runs the ping-pong kernel on sm_90a too),
  // its tail from tail_kv, then f16 q and out.
  {
    PagedSpec s;
    s.q_lens = {16, 16, 9, 16};
    s.prefixes = scaled<std::vector<int64_t>>({65536, 40000, 65536, 100}, {8192, 5000, 8192, 100});
    s.num_heads = 8;
    s.mask_kind = KDTREE_MASK_TREE_DENSE;
    check_case(report, s, {0, 16}, rng);
    s.kv_dtype = KDTREE_DTYPE_FP8_E4M3;
    s.kv_scale = 0.03f;
    s.mask_kind = KDTREE_MASK_SGLANG_FULL;
    s.tail_source = KDTREE_TAIL_FROM_EXTEND;
    check_case(report, s, {0, 16}, rng);
    s.q_dtype = s.out_dtype = KDTREE_DTYPE_F16;
    s.tail_source = KDTREE_TAIL_FROM_INDICES;
    check_case(report, s, {0}, rng);
  }
  // Slots in ascending runs (a defragmented or page-allocated cache; the
  // cases a gather by runs would take, docs/perf_notes.md session 33): runs
  // of 1000 keys (tiles inside a run and across a run's end in every
  // request), then all keys in one run, requests back to back, ending on
  // the pool's last slot.
  {
    PagedSpec s;
    s.q_lens = {16, 5, 16};
    s.prefixes = scaled<std::vector<int64_t>>({8000, 4000, 6500}, {4000, 3200, 3500});
    s.num_heads = 8;
    s.mask_kind = KDTREE_MASK_TREE_DENSE;
    s.slot_run = 1000;
    check_case(report, s, {0, 1, 2}, rng);
  }
  {
    PagedSpec s;
    s.q_lens = {8, 16};
    s.prefixes = scaled<std::vector<int64_t>>({5000, 3100}, {3200, 3100});
    s.num_heads = 16;
    s.mask_kind = KDTREE_MASK_SGLANG_FULL;
    s.tail_source = KDTREE_TAIL_FROM_EXTEND;
    s.index_dtype = KDTREE_DTYPE_INT64;
    s.kv_dtype = s.q_dtype = KDTREE_DTYPE_F16;
    s.out_dtype = KDTREE_DTYPE_F32;
    s.slot_run = int64_t(1) << 40;
    s.spare_slots = 0;
    check_case(report, s, {0, 1}, rng);
  }
  // SGLang graph padding: real requests followed by dummies (kv length 1,
  // slot 0, q_len 1, TAIL_FROM_EXTEND).
  {
    PagedSpec s;
    s.q_lens = {12, 1, 1, 1};
    s.prefixes = {700, 1, 1, 1};
    s.num_heads = 16;
    s.mask_kind = KDTREE_MASK_SGLANG_FULL;
    s.tail_source = KDTREE_TAIL_FROM_EXTEND;
    for (int64_t position = 700; position < 703; ++position) s.index_overrides.push_back({position, 0});
    check_case(report, s, some_splits(rng), rng);
  }
  // A strided out (padding after each head's values and after each token),
  // in every output dtype: its padding must stay untouched. One split of 63
  // tiles (49 in light mode) takes the sm_90a ping-pong kernel's staged
  // output rows, three splits the merge's strided stores. Light mode runs
  // one split in every dtype and three in bf16 only (racecheck over the
  // ping-pong kernel is slow: with all nine cases the grid passed 200 s).
  for (int32_t out_dtype : {KDTREE_DTYPE_BF16, KDTREE_DTYPE_F16, KDTREE_DTYPE_F32}) {
    PagedSpec s;
    s.q_lens = {16, 3};
    s.prefixes = {scaled<int64_t>(4000, 3100), 700};
    s.num_heads = 16;
    s.mask_kind = KDTREE_MASK_TREE_DENSE;
    s.out_dtype = out_dtype;
    s.out_pad_bytes = 48;
    s.extra_rows = 1;
    const std::vector<int> light = out_dtype == KDTREE_DTYPE_BF16 ? std::vector<int>{1, 3} : std::vector<int>{1};
    check_case(report, s, sanitizer_light() ? light : std::vector<int>{0, 1, 3}, rng);
  }
  // Requests with no rows between real ones.
  {
    PagedSpec s;
    s.q_lens = {0, 9, 0, 4};
    s.prefixes = {50, 200, 0, 0};
    s.num_heads = 8;
    s.mask_kind = KDTREE_MASK_TREE_DENSE;
    s.extra_rows = 2;
    check_case(report, s, some_splits(rng), rng);
  }
  return report.finish();
}
