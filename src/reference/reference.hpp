// CPU references: the oracle every other test trusts. fp64 accumulation,
// host pointers, the exact semantics of SPEC section 2. Called by src/api
// after validation.
#pragma once

#include "kdtree_kernels.h"

namespace kdtree::reference {

void verify_paged_host(const kdtree_verify_paged_params& p);
void merge_states_host(const kdtree_merge_params& p);

}  // namespace kdtree::reference
