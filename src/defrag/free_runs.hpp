// Runs of consecutive usable destination slots (free, not reserved), indexed
// by length for best-fit allocation of a window of `length` slots.
//
// Built once per plan from the slot states. The planner also claims slots
// outside this structure (windows that extend a request's own run), so runs
// stored here may hold claimed slots; take() re-checks every slot it hands
// out against the live state bytes and splits a stale run around a claimed
// slot. Each such split drops one claimed slot from the index for good, so
// the extra work is bounded by the number of claimed slots.
#pragma once

#include <cstdint>
#include <set>
#include <utility>
#include <vector>

namespace kdtree::defrag {

class FreeRuns {
 public:
  // Indexes every maximal run of >= min_length (>= 2) slots s with
  // usable(state[s]); take() is then never asked for fewer. Shorter runs
  // could never be taken: in a fragmented pool they are most runs, and
  // leaving them out keeps this index small.
  FreeRuns(const std::vector<uint8_t>& state, int64_t min_length);

  // Start of `length` (>= min_length) consecutive usable unclaimed slots taken from
  // the shortest run that holds them (lowest index within that run), or -1
  // when no run is long enough. Does not mark them claimed: the caller does.
  int64_t take(int64_t length, const std::vector<uint8_t>& state);

  static bool usable(uint8_t state);

 private:
  // Runs shorter than kExactLengths live in per-length stacks found through
  // a bitmask; longer ones, few by construction, in an ordered set.
  static constexpr int64_t kExactLengths = 1024;

  void insert(int64_t start, int64_t length);
  bool pop_best_fit(int64_t length, int64_t* start, int64_t* run_length);

  int64_t min_length_;
  std::vector<std::vector<int64_t>> starts_by_length_;
  std::vector<uint64_t> nonempty_lengths_;                 // bit per exact length
  std::set<std::pair<int64_t, int64_t>> long_runs_;       // (length, start)
};

}  // namespace kdtree::defrag
