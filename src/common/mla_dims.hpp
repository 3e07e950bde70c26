// The MLA head layout the library is built for (SPEC section 2): D_L = 512
// latent dims, which are also the value, plus D_R = 64 rope dims. Other
// (D_L, D_R) pairs are rejected as UNSUPPORTED by the API layer.
#pragma once

namespace kdtree {

inline constexpr int kLatentDim = 512;                  // D_L
inline constexpr int kRopeDim = 64;                     // D_R
inline constexpr int kHeadDim = kLatentDim + kRopeDim;  // D = 576

}  // namespace kdtree
