// Split-K verify kernels for q __half, KV fp8 e4m3.
#include "verify/verify_paged_tiles.cuh"

namespace kdtree::verify {
KDTREE_INSTANTIATE_VERIFY_TILES(__half, true)
}  // namespace kdtree::verify
