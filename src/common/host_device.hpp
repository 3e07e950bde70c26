// KDTREE_HOST_DEVICE: a function both the CUDA kernels and the host
// references (plain C++, no CUDA headers) compile.
#pragma once

#if defined(__CUDACC__)
#define KDTREE_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define KDTREE_HOST_DEVICE inline
#endif
