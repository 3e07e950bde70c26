// Input checks of the planner and the statistics, and the per-slot state they
// build. Checks run in list order (indptr, free, pinned, requests, reserved)
// so the first bad entry is the one named; nothing is written by the caller
// before this returns.
#include "defrag/slot_census.hpp"

#include <exception>
#include <string>

#include "common/error.hpp"

namespace kdtree::defrag {
namespace {

std::string entry(const char* list, int64_t index, int64_t value) {
  return std::string(list) + "[" + std::to_string(index) + "] = " + std::to_string(value);
}

void check_in_range(const char* function, const char* list, int64_t index, int64_t value,
                    int64_t num_slots) {
  if (value < 0 || value >= num_slots) {
    fail(KDTREE_ERROR_INVALID_ARGUMENT, function,
         entry(list, index, value) + " is outside [0, num_slots = " + std::to_string(num_slots) +
             ")");
  }
}

// Asks the cache for state[slots[i + kAhead]] (in range only): the lists are
// in any order, so each state access is a cache miss the loops then overlap.
constexpr int64_t kAhead = 16;
void prefetch_state(const std::vector<uint8_t>& state, const int64_t* slots, int64_t i, int64_t count) {
  if (i + kAhead < count) {
    const int64_t s = slots[i + kAhead];
    if (s >= 0 && s < static_cast<int64_t>(state.size())) __builtin_prefetch(state.data() + s, 1);
  }
}

// The earlier position of a duplicated value; only called on the error path.
int64_t first_index_of(const int64_t* values, int64_t begin, int64_t end, int64_t value) {
  for (int64_t i = begin; i < end; ++i) {
    if (values[i] == value) return i;
  }
  return end;
}

}  // namespace

std::vector<uint8_t> census_slots(const kdtree_defrag_plan_params& p, const char* function,
                                  bool with_reserved) {
  const int64_t num_slots = p.num_slots;
  std::vector<uint8_t> state;
  try {
    state.assign(static_cast<size_t>(num_slots), 0);
  } catch (const std::exception&) {  // bad_alloc, or length_error past max_size()
    fail(KDTREE_ERROR_UNSUPPORTED, function,
         "num_slots = " + std::to_string(num_slots) + ": the host cannot hold the planner's one byte per slot");
  }

  const int64_t* indptr = p.request_indptr;
  if (p.num_requests > 0) {
    if (indptr[0] < 0) {
      fail(KDTREE_ERROR_INVALID_ARGUMENT, function,
           entry("request_indptr", 0, indptr[0]) + " is negative");
    }
    for (int64_t b = 0; b < p.num_requests; ++b) {
      if (indptr[b + 1] < indptr[b]) {
        fail(KDTREE_ERROR_INVALID_ARGUMENT, function,
             entry("request_indptr", b + 1, indptr[b + 1]) + " is less than request_indptr[" +
                 std::to_string(b) + "] = " + std::to_string(indptr[b]));
      }
    }
  }

  for (int64_t i = 0; i < p.num_free; ++i) {
    prefetch_state(state, p.free_slots, i, p.num_free);
    const int64_t s = p.free_slots[i];
    check_in_range(function, "free_slots", i, s, num_slots);
    if (state[s] & kSlotFree) {
      fail(KDTREE_ERROR_INVALID_ARGUMENT, function,
           entry("free_slots", i, s) + " duplicates free_slots[" +
               std::to_string(first_index_of(p.free_slots, 0, i, s)) + "]");
    }
    state[s] |= kSlotFree;
  }

  // Before the requests: a pinned slot (the radix cache's) may be in several.
  for (int64_t i = 0; i < p.num_pinned; ++i) {
    const int64_t s = p.pinned_slots[i];
    check_in_range(function, "pinned_slots", i, s, num_slots);
    if (state[s] & kSlotFree) {
      fail(KDTREE_ERROR_INVALID_ARGUMENT, function,
           entry("pinned_slots", i, s) + " is also in free_slots");
    }
    state[s] |= kSlotPinned;
  }

  if (p.num_requests > 0) {
    const int64_t first = indptr[0];
    const int64_t last = indptr[p.num_requests];
    for (int64_t i = first; i < last; ++i) {
      prefetch_state(state, p.request_slots, i, last);
      const int64_t s = p.request_slots[i];
      check_in_range(function, "request_slots", i, s, num_slots);
      if (state[s] & kSlotFree) {
        fail(KDTREE_ERROR_INVALID_ARGUMENT, function,
             entry("request_slots", i, s) + " is also in free_slots");
      }
      if ((state[s] & (kSlotLive | kSlotPinned)) == kSlotLive) {
        fail(KDTREE_ERROR_INVALID_ARGUMENT, function,
             entry("request_slots", i, s) + " duplicates request_slots[" +
                 std::to_string(first_index_of(p.request_slots, first, i, s)) + "]");
      }
      state[s] |= kSlotLive;
    }
  }

  if (!with_reserved) return state;

  for (int64_t i = 0; i < p.num_reserved; ++i) {
    const int64_t s = p.reserved_slots[i];
    check_in_range(function, "reserved_slots", i, s, num_slots);
    state[s] |= kSlotReserved;
  }
  return state;
}

int64_t count_runs(const int64_t* slots, int64_t begin, int64_t end) {
  if (end <= begin) return 0;
  int64_t runs = 1;
  for (int64_t k = begin + 1; k < end; ++k) {
    if (slots[k] != slots[k - 1] + 1) ++runs;
  }
  return runs;
}

}  // namespace kdtree::defrag
