// The sm_90a ping-pong verify kernels for 16-bit KV (bf16 / f16 q and KV).
#include "verify/verify_paged_sm90a_pingpong.cuh"

namespace kdtree::verify {
KDTREE_INSTANTIATE_SM90A_PINGPONG(false)
}  // namespace kdtree::verify
