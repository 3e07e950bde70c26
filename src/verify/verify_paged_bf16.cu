// Split-K verify kernels for q __nv_bfloat16, KV __nv_bfloat16.
#include "verify/verify_paged_tiles.cuh"

namespace kdtree::verify {
KDTREE_INSTANTIATE_VERIFY_TILES(__nv_bfloat16, false)
}  // namespace kdtree::verify
