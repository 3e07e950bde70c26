// CUDA return codes -> kdtree::Error(KDTREE_ERROR_CUDA), naming the call site.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "common/error.hpp"

namespace kdtree {

// Throws Error(KDTREE_ERROR_CUDA, "<function>: <what>: <cuda error string>")
// when `result` is not cudaSuccess.
inline void check_cuda(cudaError_t result, const char* function, const char* what) {
  if (result != cudaSuccess) {
    fail(KDTREE_ERROR_CUDA, function,
         std::string(what) + ": " + cudaGetErrorName(result) + " (" + cudaGetErrorString(result) + ")");
  }
}

// Raises `kernel`'s dynamic shared memory limit to `bytes`, or fails
// UNSUPPORTED ("<function>: <what> need <bytes> bytes of shared memory per
// block; ...") when the device's opt-in limit `smem_optin` is lower.
// `kernel_name` names the call in a CUDA error.
template <class Kernel>
void allow_dynamic_smem(Kernel* kernel, size_t bytes, size_t smem_optin, const char* function, const char* what,
                        const char* kernel_name) {
  if (bytes > smem_optin) {
    fail(KDTREE_ERROR_UNSUPPORTED, function,
         std::string(what) + " need " + std::to_string(bytes) +
             " bytes of shared memory per block; the device offers " + std::to_string(smem_optin));
  }
  check_cuda(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(bytes)),
             function, (std::string("cudaFuncSetAttribute(") + kernel_name + ")").c_str());
}

// After a kernel launch: checks cudaGetLastError() (launch configuration errors).
inline void check_launch(const char* function, const char* kernel) {
  check_cuda(cudaGetLastError(), function, kernel);
}

}  // namespace kdtree
