// The per-row math of softmax states, shared by every kernel and by the CPU
// references: the running max with its rescale (online softmax), the
// natural-log LSE of a finished state, and the weights that merge S states.
//
// A state is (max, sum) with sum = sum_k exp(s_k - max) over the scores seen;
// -inf scores (invisible keys) and empty states are handled explicitly so no
// inf - inf NaN ever appears. Templates on float (device) and double (host
// fp64 references). Plain C++ when included by a host compiler.
#pragma once

#include <math.h>

#include "common/host_device.hpp"

namespace kdtree::merge_math {

KDTREE_HOST_DEVICE float exp_of(float x) { return expf(x); }
KDTREE_HOST_DEVICE double exp_of(double x) { return exp(x); }
KDTREE_HOST_DEVICE float log_of(float x) { return logf(x); }
KDTREE_HOST_DEVICE double log_of(double x) { return log(x); }

template <class T>
KDTREE_HOST_DEVICE T negative_infinity() {
  return -static_cast<T>(INFINITY);
}

// exp(x - max), 0 for x == -inf (also when max is -inf).
template <class T>
KDTREE_HOST_DEVICE T scaled_exp(T x, T max) {
  return x == negative_infinity<T>() ? T(0) : exp_of(x - max);
}

template <class T>
struct RunningLse {
  T max = negative_infinity<T>();
  T sum = T(0);  // sum of exp(s - max) over the scores added
};

// Raises the running max to cover `score` and returns the factor the caller
// multiplies its accumulators by (exp(old_max - new_max), 0 for an empty state)
// before adding scaled_exp(score, state.max) * value. The caller owns the sum:
// it is one more accumulator with value 1, so all-ones values give exactly 1.
template <class T>
KDTREE_HOST_DEVICE T running_max_raise(RunningLse<T>& state, T score) {
  T new_max = score > state.max ? score : state.max;
  T rescale = scaled_exp(state.max, new_max);
  state.max = new_max;
  return rescale;
}

// ln(sum exp(s)) of a state, -inf when nothing was visible.
template <class T>
KDTREE_HOST_DEVICE T lse_of(T max, T sum) {
  return sum > T(0) ? max + log_of(sum) : negative_infinity<T>();
}

// Merge of S states (lse_s, out_s): the merged lse in two passes over the
// states in index order, then weight_s = exp(lse_s - lse). `lse_at(s)` reads
// state s's lse.
template <class T, class LseAt>
KDTREE_HOST_DEVICE T merged_lse(int num_states, LseAt lse_at) {
  T max = negative_infinity<T>();
  for (int s = 0; s < num_states; ++s) {
    T x = lse_at(s);
    max = x > max ? x : max;
  }
  if (max == negative_infinity<T>()) return max;
  T sum = T(0);
  for (int s = 0; s < num_states; ++s) sum += scaled_exp(lse_at(s), max);
  return max + log_of(sum);
}

// Weight of a state with `lse_s` in a merge whose merged lse is `lse`; 0 for
// an empty state and when every state is empty.
template <class T>
KDTREE_HOST_DEVICE T state_weight(T lse_s, T lse) {
  return lse == negative_infinity<T>() ? T(0) : scaled_exp(lse_s, lse);
}

}  // namespace kdtree::merge_math
