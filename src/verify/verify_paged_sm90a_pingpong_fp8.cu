// The sm_90a ping-pong verify kernels for fp8 e4m3 KV (bf16 / f16 q).
#include "verify/verify_paged_sm90a_pingpong.cuh"

namespace kdtree::verify {
KDTREE_INSTANTIATE_SM90A_PINGPONG(true)
}  // namespace kdtree::verify
