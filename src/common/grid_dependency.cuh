// Programmatic dependent launch (compute capability 9.0+): a kernel launched
// with cudaLaunchAttributeProgrammaticStreamSerialization may start while the
// kernel before it in the stream still runs, once every block of that kernel
// has called allow_dependent_launch (or exited); it must call
// wait_for_prerequisite_grid before it reads what that kernel wrote. Both are
// no-ops below sm_90 and when no dependent launch was asked for.
#pragma once

namespace kdtree {

__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Returns once the prerequisite grid has completed and its writes are visible.
__device__ __forceinline__ void wait_for_prerequisite_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace kdtree
