// Host planner of defragmentation moves and the fragmentation statistics
// (SPEC section 5).
//
// Policy.
//  - The movable segment of a request is the part of its slot list after its
//    last fixed slot: a pinned one or a live reserved one (the whole list
//    when it has neither). Pinned slots are a radix-cache prefix shared with
//    other requests, and a reserved slot is never a destination: neither
//    moves, and slots before the last fixed one stay too, since moving them
//    cannot join them to anything across it. The planner makes the movable
//    segment one run of consecutive ascending slots.
//  - A request is planned only if its segment has >= 2 runs and every move
//    it needs fits in the remaining budget (no partial requests); a request
//    that does not fit is skipped and smaller ones after it may still fit.
//    A planned segment becomes exactly one run, so the request's run count
//    never grows (a segment of r >= 2 runs loses r - 1, at most one of which
//    could have been a join with the fixed part), other requests are not
//    touched, and re-planning the applied state converges: every round with
//    moves leaves one fewer request with a fragmented segment.
//  - Requests go most fragmented first: total runs descending, then request
//    index ascending. Output is deterministic for a given input.
//  - Destination window [a, a + M) for a segment of M slots: each position
//    either already holds the segment's token (stays in place) or is a
//    usable slot (free, not reserved, not yet claimed by this plan). The
//    candidates are the window that extends the slot right after the last
//    fixed slot (joining the prefix) and the windows that keep one of the
//    segment's three longest runs in place; the cheapest valid one wins
//    (ties: the prefix join, then longer runs). If none is valid or fits,
//    the shortest free run of >= M slots (best fit) takes the whole segment.
//  - Sources are live, unpinned and unreserved; destinations free,
//    unreserved and unique; sources are never destinations since live slots
//    are not free. Slots vacated by a move are not reused in the same plan
//    (the protocol frees them only after copy and remap).
#include <algorithm>
#include <array>
#include <vector>

#include "common/error.hpp"
#include "defrag/defrag_launch.hpp"
#include "defrag/free_runs.hpp"
#include "defrag/slot_census.hpp"

namespace kdtree::defrag {
namespace {

constexpr const char* kPlanFunction = "kdtree_defrag_plan";
constexpr const char* kStatsFunction = "kdtree_fragmentation_stats_compute";
constexpr int kAnchorRuns = 3;  // longest runs tried as in-place anchors

// A request whose movable segment is fragmented.
struct Candidate {
  int64_t request;
  int64_t total_runs;     // over the whole request: the sort key
  int64_t segment_begin;  // index into request_slots
  int64_t segment_end;
  int64_t join_slot;      // slot right after the last fixed one, or -1
};

struct Moves {
  std::vector<int64_t> src;
  std::vector<int64_t> dst;
};

// Moves needed to put segment token i at slot a + i for all i, or -1 when
// the window leaves the pool, hits a slot that is neither the token's own
// nor usable, or needs more than `limit` moves.
int64_t window_cost(const std::vector<uint8_t>& state, const int64_t* seg, int64_t length,
                    int64_t a, int64_t limit) {
  const int64_t num_slots = static_cast<int64_t>(state.size());
  if (a < 0 || a > num_slots - length) return -1;
  int64_t moves = 0;
  for (int64_t i = 0; i < length; ++i) {
    if (seg[i] == a + i) continue;
    if (!FreeRuns::usable(state[a + i]) || ++moves > limit) return -1;
  }
  return moves;
}

// Window starts that keep one of the segment's longest runs in place.
std::array<int64_t, kAnchorRuns> longest_run_anchors(const int64_t* seg, int64_t length) {
  std::array<int64_t, kAnchorRuns> start{};
  std::array<int64_t, kAnchorRuns> best_length{};
  start.fill(-1);
  best_length.fill(0);
  int64_t run_begin = 0;
  for (int64_t i = 1; i <= length; ++i) {
    if (i < length && seg[i] == seg[i - 1] + 1) continue;
    const int64_t run_length = i - run_begin;
    // Insert keeping (length desc, position asc): strict > keeps earlier runs first.
    for (int k = 0; k < kAnchorRuns; ++k) {
      if (run_length > best_length[k]) {
        for (int j = kAnchorRuns - 1; j > k; --j) {
          best_length[j] = best_length[j - 1];
          start[j] = start[j - 1];
        }
        best_length[k] = run_length;
        start[k] = seg[run_begin] - run_begin;
        break;
      }
    }
    run_begin = i;
  }
  return start;
}

// Whether some live slot never moves: a pinned one, or a live reserved one
// (it is never a destination, so moving it would hand it to the free list in
// step 4). If none is, every request's whole list is movable.
bool any_fixed_live_slot(const kdtree_defrag_plan_params& p, const std::vector<uint8_t>& state) {
  const auto live = [&](int64_t s) { return (state[s] & kSlotLive) != 0; };
  return std::any_of(p.pinned_slots, p.pinned_slots + p.num_pinned, live) ||
         std::any_of(p.reserved_slots, p.reserved_slots + p.num_reserved, live);
}

std::vector<Candidate> fragmented_requests(const kdtree_defrag_plan_params& p,
                                           const std::vector<uint8_t>& state) {
  const bool any_fixed = any_fixed_live_slot(p, state);
  std::vector<Candidate> out;
  for (int64_t b = 0; b < p.num_requests; ++b) {
    const int64_t lo = p.request_indptr[b];
    const int64_t hi = p.request_indptr[b + 1];
    int64_t begin = lo;
    if (any_fixed) {  // the segment starts after the list's last fixed slot
      for (int64_t i = hi - 1; i >= lo; --i) {
        if (state[p.request_slots[i]] & (kSlotPinned | kSlotReserved)) {
          begin = i + 1;
          break;
        }
      }
    }
    const int64_t segment_runs = count_runs(p.request_slots, begin, hi);
    if (segment_runs < 2) continue;
    const int64_t join = begin > lo ? p.request_slots[begin - 1] + 1 : -1;
    const int64_t total_runs = begin > lo ? count_runs(p.request_slots, lo, hi) : segment_runs;
    out.push_back({b, total_runs, begin, hi, join});
  }
  std::sort(out.begin(), out.end(), [](const Candidate& x, const Candidate& y) {
    return x.total_runs != y.total_runs ? x.total_runs > y.total_runs : x.request < y.request;
  });
  return out;
}

void emit_window(const int64_t* seg, int64_t length, int64_t a, std::vector<uint8_t>* state,
                 Moves* moves) {
  for (int64_t i = 0; i < length; ++i) {
    if (seg[i] == a + i) continue;
    moves->src.push_back(seg[i]);
    moves->dst.push_back(a + i);
    (*state)[a + i] |= kSlotClaimed;
  }
}

Moves plan_moves(const kdtree_defrag_plan_params& p, std::vector<uint8_t>* state) {
  Moves moves;
  if (p.budget <= 0) return moves;
  const std::vector<Candidate> requests = fragmented_requests(p, *state);
  if (requests.empty()) return moves;
  // Only a segment that no window fits takes a free run, so no run shorter
  // than the shortest fragmented segment is ever taken.
  int64_t shortest = p.num_slots;
  for (const Candidate& r : requests) shortest = std::min(shortest, r.segment_end - r.segment_begin);
  FreeRuns free_runs(*state, shortest);

  for (const Candidate& r : requests) {
    const int64_t remaining = p.budget - static_cast<int64_t>(moves.src.size());
    if (remaining <= 0) break;
    const int64_t* seg = p.request_slots + r.segment_begin;
    const int64_t length = r.segment_end - r.segment_begin;

    int64_t best_start = -1;
    int64_t best_cost = remaining;  // a window must fit the budget
    auto consider = [&](int64_t a) {
      if (a < 0) return;
      const int64_t cost = window_cost(*state, seg, length, a, best_cost);
      // Strict < keeps the earlier (preferred) candidate on ties; the first
      // valid one is accepted at cost == remaining.
      if (cost >= 0 && (best_start < 0 ? cost <= best_cost : cost < best_cost)) {
        best_start = a;
        best_cost = cost;
      }
    };
    consider(r.join_slot);
    for (int64_t a : longest_run_anchors(seg, length)) {
      if (a != r.join_slot) consider(a);
    }

    if (best_start < 0 && length <= remaining) best_start = free_runs.take(length, *state);
    if (best_start >= 0) emit_window(seg, length, best_start, state, &moves);
  }
  return moves;
}

}  // namespace

void plan(const kdtree_defrag_plan_params& p) {
  std::vector<uint8_t> state = census_slots(p, kPlanFunction, /*with_reserved=*/true);
  const Moves moves = plan_moves(p, &state);
  std::copy(moves.src.begin(), moves.src.end(), p.move_src);
  std::copy(moves.dst.begin(), moves.dst.end(), p.move_dst);
  *p.num_moves = static_cast<int64_t>(moves.src.size());
}

void fragmentation_stats(const kdtree_defrag_plan_params& p, int64_t* runs_per_request,
                         kdtree_fragmentation_stats* stats) {
  const std::vector<uint8_t> state =
      census_slots(p, kStatsFunction, /*with_reserved=*/false);

  kdtree_fragmentation_stats s = *stats;  // keeps the caller's struct_size
  s.reserved0 = 0;
  s.num_requests = p.num_requests;
  s.total_slots = 0;
  s.total_runs = 0;
  s.max_runs = 0;
  for (int64_t b = 0; b < p.num_requests; ++b) {
    const int64_t lo = p.request_indptr[b];
    const int64_t hi = p.request_indptr[b + 1];
    const int64_t runs = count_runs(p.request_slots, lo, hi);
    if (runs_per_request) runs_per_request[b] = runs;
    s.total_slots += hi - lo;
    s.total_runs += runs;
    s.max_runs = std::max(s.max_runs, runs);
  }
  s.mean_run_length =
      s.total_runs > 0 ? static_cast<double>(s.total_slots) / static_cast<double>(s.total_runs)
                       : 0.0;

  int64_t largest = 0;
  int64_t current = 0;
  for (uint8_t slot : state) {
    current = (slot & kSlotFree) ? current + 1 : 0;
    largest = std::max(largest, current);
  }
  s.largest_free_run = largest;
  s.num_free = p.num_free;
  *stats = s;
}

}  // namespace kdtree::defrag
