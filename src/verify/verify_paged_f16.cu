// Split-K verify kernels for q __half, KV __half.
#include "verify/verify_paged_tiles.cuh"

namespace kdtree::verify {
KDTREE_INSTANTIATE_VERIFY_TILES(__half, false)
}  // namespace kdtree::verify
