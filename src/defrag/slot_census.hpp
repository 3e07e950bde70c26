// The planner's view of the pool: one state byte per slot, built from the
// host lists of kdtree_defrag_plan_params while checking them. Shared by the
// planner and the fragmentation statistics so both reject the same inputs
// with the same messages.
#pragma once

#include <cstdint>
#include <vector>

#include "kdtree_kernels.h"

namespace kdtree::defrag {

// Bits of a slot's state byte.
enum SlotBits : uint8_t {
  kSlotLive = 1,      // in some request's slot list
  kSlotFree = 2,      // in free_slots
  kSlotPinned = 4,    // in pinned_slots: never moved, still occupied
  kSlotReserved = 8,  // in reserved_slots: never a destination
  kSlotClaimed = 16,  // already a destination of the plan being built
};

// Checks the lists and returns the state of every slot in [0, num_slots).
// Throws INVALID_ARGUMENT naming `function`, the list, the index and the
// value for: request_indptr decreasing or negative; a slot outside
// [0, num_slots); a slot twice in free_slots, or twice over all requests
// unless it is pinned (a radix-cache prefix that requests share); a live or
// pinned slot that is also free; and, when `with_reserved`, a reserved slot
// out of range (duplicates in pinned_slots and reserved_slots are harmless
// and accepted). UNSUPPORTED when the host cannot hold num_slots bytes.
std::vector<uint8_t> census_slots(const kdtree_defrag_plan_params& p, const char* function,
                                  bool with_reserved);

// Maximal runs of consecutive ascending slots (slots[k+1] == slots[k] + 1)
// in slots[begin, end); 0 for an empty range.
int64_t count_runs(const int64_t* slots, int64_t begin, int64_t end);

}  // namespace kdtree::defrag
