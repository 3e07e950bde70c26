// kdtree_merge_attention_states_host: the fp64 twin of the merge kernel.
// Same math (merge_math.cuh), same order over states, double accumulation:
//   lse = ln(sum_s exp(lse_s)),  out = sum_{s = 0..S-1} exp(lse_s - lse) * out_s.
#include <cstdint>
#include <vector>

#include "merge/merge_math.cuh"
#include "reference/host_dtype.hpp"
#include "reference/reference.hpp"

namespace kdtree::reference {
namespace {

using namespace kdtree::host_dtype;

}  // namespace

void merge_states_host(const kdtree_merge_params& p) {
  const int64_t rows = p.num_tokens * p.num_heads;
  std::vector<double> weight(size_t(p.num_states));
  std::vector<double> acc(size_t(p.head_dim));
  for (int64_t t = 0; t < p.num_tokens; ++t) {
    for (int32_t h = 0; h < p.num_heads; ++h) {
      const int64_t row = t * p.num_heads + h;
      auto lse_at = [&](int s) { return double(p.states_lse[s * rows + row]); };
      double lse = merge_math::merged_lse<double>(p.num_states, lse_at);
      for (int s = 0; s < p.num_states; ++s) weight[s] = merge_math::state_weight(lse_at(s), lse);

      for (auto& a : acc) a = 0.0;
      for (int s = 0; s < p.num_states; ++s) {
        if (weight[s] == 0.0) continue;  // an empty state's out may be anything
        int64_t base = s * p.states_stride_state + t * p.states_stride_token + h * p.states_stride_head;
        for (int d = 0; d < p.head_dim; ++d) acc[d] += weight[s] * load_element(p.states, base + d, p.states_dtype);
      }
      int64_t out_base = t * p.out_stride_token + int64_t(h) * p.out_stride_head;
      for (int d = 0; d < p.head_dim; ++d) store_element(p.out, out_base + d, p.out_dtype, acc[d]);
      if (p.lse) p.lse[row] = static_cast<float>(lse);
    }
  }
}

}  // namespace kdtree::reference
