// extern "C" merge entry points: validate -> device -> enqueue (or the host twin).
#include <cstring>

#include "api/validate.hpp"
#include "common/device.hpp"
#include "common/error.hpp"
#include "merge/merge_launch.hpp"
#include "reference/reference.hpp"

namespace kdtree::api {
namespace {

// Returns false when num_tokens == 0 (a successful no-op). `device` adds the
// 16-byte alignment rules of the vectorized kernel.
bool validate_merge(const Checker& c, const kdtree_merge_params* p, bool device) {
  c.not_null(p, "params");
  c.struct_size(p->struct_size, sizeof(kdtree_merge_params), "kdtree_merge_params");
  c.at_least(p->num_tokens, 0, "num_tokens");
  if (p->num_tokens == 0) return false;

  c.at_least(p->num_states, 1, "num_states");
  c.at_least(p->num_heads, 1, "num_heads");
  c.built_range(p->num_tokens, 1, INT32_MAX, "num_tokens");  // grid.x
  c.built_range(p->num_heads, 1, 65535, "num_heads");        // grid.y
  c.built_range(p->head_dim, 1, kMaxMergeHeadDim, "head_dim");
  if (p->head_dim % 8 != 0) {
    c.fail(KDTREE_ERROR_UNSUPPORTED,
           "head_dim = " + std::to_string(p->head_dim) + " is not a multiple of 8");
  }
  const std::initializer_list<int32_t> floats = {KDTREE_DTYPE_F32, KDTREE_DTYPE_BF16,
                                                 KDTREE_DTYPE_F16};
  c.dtype_in(p->states_dtype, floats, "states_dtype");
  c.dtype_in(p->out_dtype, floats, "out_dtype");
  c.zero(p->reserved0, "reserved0");
  c.zero(p->reserved1, "reserved1");

  c.not_null(p->states, "states");
  c.not_null(p->states_lse, "states_lse");
  c.not_null(p->out, "out");

  const size_t states_bytes = dtype_bytes(p->states_dtype);
  const size_t out_bytes = dtype_bytes(p->out_dtype);
  const std::initializer_list<Dim> states_dims = {
      {"states_stride_state", p->num_states, p->states_stride_state},
      {"states_stride_token", p->num_tokens, p->states_stride_token},
      {"states_stride_head", p->num_heads, p->states_stride_head}};
  const std::initializer_list<Dim> out_dims = {{"out_stride_token", p->num_tokens, p->out_stride_token},
                                               {"out_stride_head", p->num_heads, p->out_stride_head}};
  c.strided_span(states_dims, p->head_dim, states_bytes, "states");
  c.product(c.product(p->num_states, p->num_tokens, "num_states * num_tokens (states_lse)"),
            p->num_heads, "num_states * num_tokens * num_heads (states_lse)");
  c.strided_span(out_dims, p->head_dim, out_bytes, "out");
  if (!device) return true;

  c.rows_aligned(p->states, states_dims, states_bytes, "states");
  c.aligned(p->states_lse, 4, "states_lse");
  c.rows_aligned(p->out, out_dims, out_bytes, "out");
  c.aligned(p->lse, 4, "lse");
  return true;
}

}  // namespace
}  // namespace kdtree::api

using kdtree::api::Checker;

extern "C" {

KDTREE_API kdtree_status kdtree_merge_params_init(kdtree_merge_params* params) {
  return kdtree::guard("kdtree_merge_params_init", [&] {
    Checker("kdtree_merge_params_init").not_null(params, "params");
    std::memset(params, 0, sizeof(*params));
    params->struct_size = sizeof(*params);
    params->num_states = 1;
    params->states_dtype = KDTREE_DTYPE_F32;
    params->out_dtype = KDTREE_DTYPE_F32;
  });
}

KDTREE_API kdtree_status kdtree_merge_attention_states(const kdtree_merge_params* params,
                                                       kdtree_stream_t stream) {
  const char* fn = "kdtree_merge_attention_states";
  return kdtree::guard(fn, [&] {
    if (!kdtree::api::validate_merge(Checker(fn), params, /*device=*/true)) return;
    kdtree::current_device(fn);
    kdtree::merge::launch_merge(*params, stream);
  });
}

KDTREE_API kdtree_status kdtree_merge_attention_states_host(const kdtree_merge_params* params) {
  const char* fn = "kdtree_merge_attention_states_host";
  return kdtree::guard(fn, [&] {
    if (!kdtree::api::validate_merge(Checker(fn), params, /*device=*/false)) return;
    kdtree::reference::merge_states_host(*params);
  });
}

}  // extern "C"
