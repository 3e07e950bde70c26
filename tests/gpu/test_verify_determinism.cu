// Same inputs and same num_splits give bitwise-identical out and lse, 20
// repeats each, for kdtree_verify_paged (several split counts, 0 included)
// and for the oracle. Under a sanitizer: 3 repeats, prefixes cut by 4.
#include <string>
#include <vector>

#include "common/gpu_test.hpp"
#include "common/paged_problem.hpp"

using namespace kdtest;

int main() {
  require_gpu_or_skip("test_verify_determinism");
  Rng rng(test_seed());
  Report report("test_verify_determinism");
  announce_light("test_verify_determinism", "3 repeats instead of 20, prefixes 1024/250/17/625");
  const int repeats = scaled(20, 3);

  PagedSpec s;
  s.q_lens = {16, 16, 9, 16};
  s.prefixes = scaled<std::vector<int64_t>>({4096, 1000, 17, 2500}, {1024, 250, 17, 625});
  s.num_heads = 16;
  s.mask_kind = KDTREE_MASK_TREE_DENSE;
  PagedProblem problem(s, rng);
  const PagedResult reference = problem.run_host();

  const std::vector<std::pair<Entry, int>> runs = {
      {Entry::kOracle, 0}, {Entry::kProduction, 0}, {Entry::kProduction, 1},
      {Entry::kProduction, 5}, {Entry::kProduction, 32}};
  for (const auto& run : runs) {
    const std::string what = std::string(entry_name(run.first)) + " splits=" + std::to_string(run.second);
    PagedResult first = problem.run_device(run.first, run.second);
    Comparison c = problem.compare(first, reference);
    report.error(c.rel_frobenius);
    report.check(within_bars(c), what + ": first run off the reference");
    int differing = 0;
    for (int repeat = 1; repeat < repeats; ++repeat) {
      PagedResult again = problem.run_device(run.first, run.second);
      differing += again.out_bytes != first.out_bytes || again.lse_bytes != first.lse_bytes;
    }
    report.add_case();
    report.check(differing == 0, what + ": " + std::to_string(differing) + " of " +
                                     std::to_string(repeats - 1) + " repeats differ bitwise");
  }
  return report.finish();
}
