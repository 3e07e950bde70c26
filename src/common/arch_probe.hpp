// Whether this library holds a kernel image the current device can run.
#pragma once

#include <cuda_runtime_api.h>

namespace kdtree {

// cudaFuncGetAttributes on a trivial kernel compiled with the library's SM
// list: cudaSuccess when an image (cubin or JIT-able PTX) fits the current
// device, cudaErrorNoKernelImageForDevice / cudaErrorInvalidDeviceFunction /
// cudaErrorUnsupportedPtxVersion when none does.
cudaError_t probe_kernel_image();

}  // namespace kdtree
