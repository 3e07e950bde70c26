// Split-K verify kernels for q __nv_bfloat16, KV fp8 e4m3.
#include "verify/verify_paged_tiles.cuh"

namespace kdtree::verify {
KDTREE_INSTANTIATE_VERIFY_TILES(__nv_bfloat16, true)
}  // namespace kdtree::verify
