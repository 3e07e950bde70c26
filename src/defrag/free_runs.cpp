#include "defrag/free_runs.hpp"

#include <algorithm>
#include <limits>

#include "defrag/slot_census.hpp"

namespace kdtree::defrag {

bool FreeRuns::usable(uint8_t state) {
  return (state & (kSlotFree | kSlotReserved | kSlotClaimed)) == kSlotFree;
}

FreeRuns::FreeRuns(const std::vector<uint8_t>& state, int64_t min_length)
    : min_length_(std::max<int64_t>(min_length, 2)),
      starts_by_length_(kExactLengths),
      nonempty_lengths_(kExactLengths / 64, 0) {
  // Every run of >= min_length_ usable slots holds a multiple of min_length_:
  // only those slots are probed, and each hit grows into its maximal run.
  const int64_t num_slots = static_cast<int64_t>(state.size());
  std::vector<std::pair<int64_t, int64_t>> runs;  // (start, length), ascending
  int64_t scanned_to = 0;                          // slots below belong to runs already seen
  for (int64_t probe = 0; probe < num_slots; probe += min_length_) {
    if (probe < scanned_to || !usable(state[probe])) continue;
    int64_t begin = probe;
    while (begin > scanned_to && usable(state[begin - 1])) --begin;
    int64_t end = probe + 1;
    while (end < num_slots && usable(state[end])) ++end;
    runs.emplace_back(begin, end - begin);
    scanned_to = end;
  }
  // Descending insertion: each per-length stack then pops its lowest start first.
  for (auto it = runs.rbegin(); it != runs.rend(); ++it) insert(it->first, it->second);
}

void FreeRuns::insert(int64_t start, int64_t length) {
  if (length < min_length_) return;
  if (length < kExactLengths) {
    starts_by_length_[length].push_back(start);
    nonempty_lengths_[length / 64] |= uint64_t{1} << (length % 64);
  } else {
    long_runs_.emplace(length, start);
  }
}

bool FreeRuns::pop_best_fit(int64_t length, int64_t* start, int64_t* run_length) {
  if (length < kExactLengths) {
    for (int64_t word = length / 64; word < kExactLengths / 64; ++word) {
      uint64_t bits = nonempty_lengths_[word];
      if (word == length / 64) bits &= ~uint64_t{0} << (length % 64);
      if (bits == 0) continue;
      const int64_t found = word * 64 + __builtin_ctzll(bits);
      std::vector<int64_t>& stack = starts_by_length_[found];
      *start = stack.back();
      *run_length = found;
      stack.pop_back();
      if (stack.empty()) nonempty_lengths_[word] &= ~(uint64_t{1} << (found % 64));
      return true;
    }
  }
  auto it = long_runs_.lower_bound({length, std::numeric_limits<int64_t>::min()});
  if (it == long_runs_.end()) return false;
  *run_length = it->first;
  *start = it->second;
  long_runs_.erase(it);
  return true;
}

int64_t FreeRuns::take(int64_t length, const std::vector<uint8_t>& state) {
  int64_t start = 0;
  int64_t run_length = 0;
  while (pop_best_fit(length, &start, &run_length)) {
    int64_t k = 0;
    while (k < length && usable(state[start + k])) ++k;
    if (k == length) {
      insert(start + length, run_length - length);
      return start;
    }
    // Slot start + k was claimed since the run was indexed: split around it.
    insert(start, k);
    insert(start + k + 1, run_length - k - 1);
  }
  return -1;
}

}  // namespace kdtree::defrag
