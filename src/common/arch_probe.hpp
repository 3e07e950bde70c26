// Whether this library holds a kernel image the current device can run.
#pragma once

#include <cuda_runtime_api.h>

namespace kdtree {

// cudaFuncGetAttributes on a trivial kernel compiled with the library's SM
// list: cudaSuccess when an image (cubin or JIT-able PTX) fits the current
// device, cudaErrorNoKernelImageForDevice / cudaErrorInvalidDeviceFunction /
// cudaErrorUnsupportedPtxVersion when none does. On success *image_arch is
// the __CUDA_ARCH__ that image was compiled for (its virtual architecture x
// 10): every kernel of the library runs an image of that arch on this device,
// which is not the device's own where a build lacks it (an sm_80 cubin on an
// sm_86 device, compute_89 PTX JIT-compiled for an sm_90 one).
cudaError_t probe_kernel_image(int* image_arch);

}  // namespace kdtree
