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

// After a kernel launch: checks cudaGetLastError() (launch configuration errors).
inline void check_launch(const char* function, const char* kernel) {
  check_cuda(cudaGetLastError(), function, kernel);
}

}  // namespace kdtree
