// Exact cases of SPEC section 7 on the GPU, for kdtree_verify_paged and
// kdtree_verify_paged_reference: all-ones values give exactly 1 (and every
// fp8 code as a value gives its value); a
// TREE_DENSE mask equal to causal equals CAUSAL bitwise; the TREE_DENSE,
// TREE_BITS and SGLANG_FULL encodings of one tree agree bitwise. Then the
// device-side error rules: out-of-range slots flagged and invisible,
// kv shorter than q, a bad indptr skipped, and the zero-size batch.
// Under a sanitizer (light mode) the prefixes of the all-ones, causal and
// encoding cases are cut about 4x; every case and entry point still runs.
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/gpu_test.hpp"
#include "common/paged_problem.hpp"
#include "reference/host_dtype.hpp"

using namespace kdtest;

namespace {

const std::vector<std::pair<Entry, int>> kRuns = {
    {Entry::kOracle, 0}, {Entry::kProduction, 1}, {Entry::kProduction, 4}, {Entry::kProduction, 0}};

std::string label(const char* what, Entry entry, int splits) {
  return std::string(what) + " [" + entry_name(entry) + " splits=" + std::to_string(splits) + "]";
}

// Same inputs (same seed, trees given) in different mask encodings.
PagedResult run_with_mask(PagedSpec spec, int32_t mask_kind, uint64_t seed, Entry entry, int splits) {
  spec.mask_kind = mask_kind;
  Rng rng(seed);
  PagedProblem problem(spec, rng);
  return problem.run_device(entry, splits);
}

// All-ones values: every output exactly 1, checked per output dtype.
void check_all_ones(Report& report, PagedProblem& problem, const PagedSpec& s, const std::string& what, Entry entry,
                    int splits) {
  report.add_case();
  PagedResult got = problem.run_device(entry, splits);
  size_t wrong = 0;
  double worst = 0.0;
  for (size_t e = 0; e < size_t(problem.rows_in_requests()) * s.num_heads * 512; ++e) {
    wrong += got.out[e] != 1.0f;
    worst = std::fmax(worst, std::fabs(double(got.out[e]) - 1.0));
  }
  report.check(wrong == 0, label(what.c_str(), entry, splits) + ": " + std::to_string(wrong) +
                               " outputs differ from 1 (largest |out - 1| " + std::to_string(worst) + ")");
}

const std::pair<int32_t, const char*> kOutDtypes[] = {
    {KDTREE_DTYPE_F32, "f32"}, {KDTREE_DTYPE_BF16, "bf16"}, {KDTREE_DTYPE_F16, "f16"}};

void all_ones(Report& report, Rng& rng) {
  // Every output dtype: rows stored in 16 bits are normalized by a product,
  // not the refined division (RowDivisor::product), and must read 1 too.
  // Two score scales: the test's usual one, and a sharp one (score spread ~15
  // in log2 units) under which the online softmax's running maximum moves by
  // more than its lazy threshold again and again, so every rescale path runs.
  for (const auto& out : kOutDtypes) {
    for (int32_t kv : {KDTREE_DTYPE_BF16, KDTREE_DTYPE_F16, KDTREE_DTYPE_FP8_E4M3}) {
      for (const float sm_scale : {0.0f, 1.0f}) {
        PagedSpec s;
        s.sm_scale = sm_scale;
        s.q_lens = {16, 3, 40};
        s.prefixes = scaled<std::vector<int64_t>>({1000, 0, 70}, {250, 0, 70});
        s.num_heads = 8;
        s.mask_kind = KDTREE_MASK_TREE_BITS;
        s.kv_dtype = kv;
        s.q_dtype = kv == KDTREE_DTYPE_F16 ? KDTREE_DTYPE_F16 : KDTREE_DTYPE_BF16;
        s.out_dtype = out.first;
        s.ones_values = true;
        PagedProblem problem(s, rng);
        for (const auto& run : kRuns) {
          check_all_ones(report, problem, s,
                         std::string("all-ones values, ") + out.second + " out" + (sm_scale > 0.f ? ", sharp" : ""),
                         run.first, run.second);
        }
      }
    }
  }
}

// All-ones values with chosen scores, in log2 units (scale_log2 = 1/8): tile
// t of the unsplit row group at level 0, 8.125, 16, 16.25 for t < 4, -100
// after (48 tiles: the sm_90a ping-pong kernel). Under the lazy rescale
// (threshold 8) tile 3's maximum passes tile 2's by 0.25 only after tile 2
// kept the old one, so the P of tile 2 (2^7.875 each) is rescaled by
// 2^-8.125 to about 0.85, near tile 3's 1, and its rounding before and
// after that rescale moves f16 rows by ~4e-4 unless the row weights count it
// (the ping-pong kernel's warpgroup 0 takes warpgroup 1's weights, w_fix).
void all_ones_rescaled(Report& report, Rng& rng) {
  for (const auto& out : kOutDtypes) {
    PagedSpec s;
    s.q_lens = {1};
    s.prefixes = {48 * 64 - 1};
    s.num_heads = 64;
    s.mask_kind = KDTREE_MASK_CAUSAL;
    s.out_dtype = out.first;
    s.ones_values = true;
    s.sm_scale = 0.125f / 1.4426950408889634f;
    s.key_rope0 = [](int64_t key) {
      const float level[] = {0.0f, 8.125f, 16.0f, 16.25f};
      return 8.0f * (key / 64 < 4 ? level[key / 64] : -100.0f);  // (bf16 holds each exactly)
    };
    PagedProblem problem(s, rng);
    check_all_ones(report, problem, s, std::string("all-ones values, chosen rescales, ") + out.second + " out",
                   Entry::kProduction, 1);
  }
}

// All-ones values over one long unsplit row group: the most additions into
// one row's weight and O (131072 keys; 16384 under a sanitizer).
void all_ones_long(Report& report, Rng& rng) {
  for (const auto& out : kOutDtypes) {
    PagedSpec s;
    s.q_lens = {4};
    s.prefixes = {scaled<int64_t>(131072, 16384)};
    s.num_heads = 16;
    s.mask_kind = KDTREE_MASK_CAUSAL;
    s.out_dtype = out.first;
    s.ones_values = true;
    PagedProblem problem(s, rng);
    check_all_ones(report, problem, s, std::string("all-ones values, long row, ") + out.second + " out",
                   Entry::kProduction, 1);
  }
}

// Every fp8 e4m3 code as a value: value dim d of every key holds code d % 256
// (the NaN codes 0x7F and 0xFF hold 0: the sm_90a path reads them as +-480,
// the small tiles as NaN), so each output row is those values times kv_scale
// whatever the softmax weights (to the fp32 rounding of O and its weight:
// 1e-4 relative, where a code decoded wrong is off by 1/8 or more).
// Splits of 63 tiles run the sm_90a ping-pong kernel on an H200, whose gather
// converts with integer arithmetic and one multiply; 4 and the auto plan's
// short splits the small tiles' conversion; subnormal codes included.
void every_fp8_code(Report& report, Rng& rng) {
  constexpr float kScale = 0.0625f;  // a power of two: each code's value times it is exact
  const auto code_value = [](int d) {
    const uint8_t code = static_cast<uint8_t>(d % 256);
    return (code & 0x7F) == 0x7F ? 0.0f : kdtree::host_dtype::fp8_e4m3_to_float(code) * kScale;
  };
  PagedSpec s;
  s.q_lens = {4};
  s.prefixes = {4000};
  s.num_heads = 8;
  s.mask_kind = KDTREE_MASK_CAUSAL;
  s.kv_dtype = KDTREE_DTYPE_FP8_E4M3;
  s.kv_scale = kScale;
  s.out_dtype = KDTREE_DTYPE_F32;
  s.value_dim = code_value;
  PagedProblem problem(s, rng);
  for (const auto& run : kRuns) {
    report.add_case();
    PagedResult got = problem.run_device(run.first, run.second);
    size_t wrong = 0;
    double worst = 0.0;
    for (size_t e = 0; e < size_t(problem.rows_in_requests()) * s.num_heads * 512; ++e) {
      const double want = code_value(int(e % 512)), err = std::fabs(double(got.out[e]) - want);
      wrong += !(err <= 1e-4 * std::fabs(want));  // a wrong bit of a code is off by 1/8 or more
      worst = std::fmax(worst, err / std::fmax(std::fabs(want), 1e-30));
    }
    report.check(wrong == 0, label("every fp8 code as a value", run.first, run.second) + ": " +
                                 std::to_string(wrong) + " outputs off (largest relative error " +
                                 std::to_string(worst) + ")");
  }
}

void dense_causal_equals_causal(Report& report, Rng& rng) {
  PagedSpec s;
  s.q_lens = {16, 128, 1};
  s.prefixes = scaled<std::vector<int64_t>>({333, 64, 0}, {80, 64, 0});
  s.num_heads = 16;
  for (int q : s.q_lens) s.trees.push_back(causal_tree(q));
  const uint64_t seed = rng.next();
  for (const auto& run : kRuns) {
    report.add_case();
    PagedResult dense = run_with_mask(s, KDTREE_MASK_TREE_DENSE, seed, run.first, run.second);
    PagedResult causal = run_with_mask(s, KDTREE_MASK_CAUSAL, seed, run.first, run.second);
    report.check(dense.out_bytes == causal.out_bytes && dense.lse_bytes == causal.lse_bytes,
                 label("TREE_DENSE(causal) == CAUSAL bitwise", run.first, run.second));
  }
}

void encodings_agree(Report& report, Rng& rng) {
  for (int32_t tail : {KDTREE_TAIL_FROM_INDICES, KDTREE_TAIL_FROM_EXTEND}) {
    PagedSpec s;
    s.q_lens = {16, 7, 64};
    s.prefixes = scaled<std::vector<int64_t>>({500, 0, 129}, {129, 0, 129});
    s.num_heads = 8;
    s.tail_source = tail;
    for (int q : s.q_lens) s.trees.push_back(random_tree(rng, q));
    const uint64_t seed = rng.next();
    for (const auto& run : kRuns) {
      report.add_case();
      PagedResult dense = run_with_mask(s, KDTREE_MASK_TREE_DENSE, seed, run.first, run.second);
      PagedResult bits = run_with_mask(s, KDTREE_MASK_TREE_BITS, seed, run.first, run.second);
      PagedResult full = run_with_mask(s, KDTREE_MASK_SGLANG_FULL, seed, run.first, run.second);
      report.check(dense.out_bytes == bits.out_bytes && dense.out_bytes == full.out_bytes &&
                       dense.lse_bytes == bits.lse_bytes && dense.lse_bytes == full.lse_bytes,
                   label("TREE_DENSE == TREE_BITS == SGLANG_FULL bitwise", run.first, run.second));
    }
  }
}

// Out-of-range slots, in a fragmented cache and (runs) among keys in
// consecutive slots, long enough for the sm_90a ping-pong kernel; 16-bit and
// fp8 KV (each gather reads rows its own way).
void out_of_range_slots(Report& report, Rng& rng) {
  for (const bool runs : {false, true})
  for (int32_t index : {KDTREE_DTYPE_INT32, KDTREE_DTYPE_INT64})
  for (int32_t kv : {KDTREE_DTYPE_BF16, KDTREE_DTYPE_FP8_E4M3}) {
    PagedSpec s;
    s.kv_dtype = kv;
    s.kv_scale = kv == KDTREE_DTYPE_FP8_E4M3 ? 0.05f : 1.0f;
    s.q_lens = {4, 6};
    s.prefixes = {runs ? 4000 : 100, 30};
    s.num_heads = 8;
    s.mask_kind = KDTREE_MASK_CAUSAL;
    s.index_dtype = index;
    if (runs) s.slot_run = 4004;
    // Past the pool (its 37 spare slots and up to 2 between runs), negative,
    // and (int64) far away: must never be dereferenced. With runs, also a
    // slot in the pool out of its run's order (a tile that is not contiguous).
    const int64_t keys0 = s.prefixes[0] + s.q_lens[0];
    s.index_overrides = {{5, keys0 + 137}, {keys0 + 3, -1}};
    if (runs) s.index_overrides.push_back({2000, keys0 + 40});
    if (index == KDTREE_DTYPE_INT64) s.index_overrides.push_back({50, int64_t(1) << 40});
    PagedProblem problem(s, rng);
    PagedResult reference = problem.run_host();
    report.check(reference.flag == KDTREE_FLAG_SLOT_OUT_OF_RANGE, "host flags out-of-range slots");
    for (const auto& run : kRuns) {
      report.add_case();
      PagedResult got = problem.run_device(run.first, run.second);
      Comparison c = problem.compare(got, reference);
      report.error(c.rel_frobenius);
      report.check(got.flag == KDTREE_FLAG_SLOT_OUT_OF_RANGE, label("out-of-range slot flagged", run.first, run.second));
      report.check(within_bars(c), label("out-of-range slots are invisible keys", run.first, run.second));
      report.check(got.guards_ok, label("guards intact", run.first, run.second));
    }
  }
}

void kv_shorter_than_q(Report& report, Rng& rng) {
  PagedSpec s;
  s.q_lens = {4, 5};
  s.prefixes = {20, -2};  // request 1: kv_len = prefix + q_len = 3 keys for 5 rows
  s.num_heads = 8;
  PagedProblem problem(s, rng);
  PagedResult reference = problem.run_host();
  report.check(reference.flag == KDTREE_FLAG_KV_SHORTER_THAN_Q, "host flags kv shorter than q");
  for (const auto& run : kRuns) {
    report.add_case();
    PagedResult got = problem.run_device(run.first, run.second);
    report.check(got.flag == KDTREE_FLAG_KV_SHORTER_THAN_Q, label("kv shorter than q flagged", run.first, run.second));
    bool empty_rows = true;
    for (int t = 4; t < 9; ++t)
      for (int h = 0; h < s.num_heads; ++h) {
        empty_rows &= std::isinf(got.lse[size_t(t) * s.num_heads + h]) && got.lse[size_t(t) * s.num_heads + h] < 0;
        for (int d = 0; d < 512; ++d) empty_rows &= got.out[(size_t(t) * s.num_heads + h) * 512 + d] == 0.0f;
      }
    report.check(empty_rows, label("kv shorter than q: out 0, lse -inf", run.first, run.second));
    Comparison c = problem.compare(got, reference);
    report.check(within_bars(c), label("other requests still computed", run.first, run.second));
  }
}

void bad_indptr(Report& report, Rng& rng) {
  PagedSpec s;
  s.q_lens = {3, 12};
  s.prefixes = {40, 40};
  s.num_heads = 8;
  s.max_q_len = 8;  // request 1 exceeds it
  s.mask_kind = KDTREE_MASK_TREE_DENSE;
  s.trees = {random_tree(rng, 3), random_tree(rng, 12)};
  PagedProblem problem(s, rng);
  PagedResult reference = problem.run_host();
  report.check(reference.flag == KDTREE_FLAG_BAD_INDPTR, "host flags a bad indptr");
  const size_t row_bytes = size_t(s.num_heads) * 512 * 2;
  for (const auto& run : kRuns) {
    report.add_case();
    PagedResult got = problem.run_device(run.first, run.second);
    report.check(got.flag == KDTREE_FLAG_BAD_INDPTR, label("bad indptr flagged", run.first, run.second));
    bool untouched = true;
    for (size_t k = 3 * row_bytes; k < 15 * row_bytes; ++k) untouched &= got.out_bytes[k] == kOutputSentinel;
    report.check(untouched, label("bad request writes nothing", run.first, run.second));
    bool first_ok = true;
    for (size_t e = 0; e < 3 * size_t(s.num_heads) * 512; ++e)
      first_ok &= std::fabs(got.out[e] - reference.out[e]) <= 0.02f * (1.0f + std::fabs(reference.out[e]));
    report.check(first_ok, label("good request still computed", run.first, run.second));
  }
}

void zero_batch(Report& report, Rng& rng) {
  PagedSpec s;
  s.q_lens = {5};
  s.prefixes = {10};
  s.num_heads = 8;
  PagedProblem problem(s, rng);
  for (const auto& run : kRuns) {
    report.add_case();
    problem.reset_outputs(nullptr);
    kdtree_verify_paged_params p = problem.device_params(run.second);
    p.batch_size = 0;
    kdtree_status status = run.first == Entry::kOracle ? kdtree_verify_paged_reference(&p, nullptr)
                                                       : kdtree_verify_paged(&p, nullptr, 0, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    PagedResult got = problem.collect();
    bool untouched = true;
    for (uint8_t byte : got.out_bytes) untouched &= byte == kOutputSentinel;
    report.check(status == KDTREE_OK && untouched && got.flag == 0,
                 label("zero-size batch is a no-op", run.first, run.second));
  }
}

}  // namespace

int main() {
  require_gpu_or_skip("test_verify_exact");
  Rng rng(test_seed());
  Report report("test_verify_exact");
  announce_light("test_verify_exact", "prefixes 250 / 80 / 129 / 16384 instead of 1000 / 333 / 500 / 131072");
  all_ones(report, rng);
  all_ones_rescaled(report, rng);
  all_ones_long(report, rng);
  every_fp8_code(report, rng);
  dense_causal_equals_causal(report, rng);
  encodings_agree(report, rng);
  out_of_range_slots(report, rng);
  kv_shorter_than_q(report, rng);
  bad_indptr(report, rng);
  zero_batch(report, rng);
  return report.finish();
}
