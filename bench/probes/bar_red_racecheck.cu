// Does compute-sanitizer's racecheck model bar.red on a named barrier with a
// thread count? Two groups of 128 threads: a CTA barrier opens each step, each
// thread then writes the next step's half of a double buffer (as the verify
// kernel's gather does) and, after its group's barrier, reads the other
// group's words of this step's half. Race-free: every write of step t + 1's
// half follows the CTA barrier of step t + 1, every read of it precedes that
// barrier. Built twice: group barrier by bar.sync (-DGROUP_RED=0) and by
// bar.red.or.pred (-DGROUP_RED=1), each with plain stores (-DCP_ASYNC=0) or
// 16-byte cp.async (-DCP_ASYNC=1, waited on before the CTA barrier, as the
// verify kernel's ring does); racecheck should report nothing for any.
//
// Measured (H200, CUDA 13, 2026-12-02): nothing for bar.sync or bar.red,
// plain stores or cp.async, while both groups pass the same barriers; with
// -DUNEVEN=1 racecheck reports hazards on the cross-group reads for both
// barrier forms, on this race-free kernel. Session 53 (H200, 2026-12-02):
// -DUNEVEN=1 4 hazards, -DUNEVEN=1 -DBALANCED=1 (the other group passing as
// many barriers of its own id) none. So the verify kernel's row groups that
// skip the exact softmax pass still pass its two barriers
// (verify_paged_kernel.cuh).
//   nvcc -arch=sm_90 -lineinfo -DUNEVEN=1 -DBALANCED=1 bar_red_racecheck.cu -o brr &&
//   compute-sanitizer --tool racecheck ./brr
#include <cstdio>
#ifndef GROUP_RED
#define GROUP_RED 1
#endif
// -DUNEVEN=1: group 0 passes two more barriers of its own on odd steps (the
// verify kernel's exact softmax pass, taken by one row group and not the
// other).
#ifndef UNEVEN
#define UNEVEN 0
#endif
// -DBALANCED=1 (with UNEVEN): group 1 passes two barriers of its own on those
// steps too, so both groups pass as many barriers, by different ids.
#ifndef BALANCED
#define BALANCED 0
#endif
#ifndef CP_ASYNC
#define CP_ASYNC 1
#endif
template <int kId>
__device__ bool group_barrier(bool pred) {
#if GROUP_RED
  unsigned any;
  asm volatile("{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n bar.red.or.pred q, %2, 128, p;\n selp.u32 %0, 1, 0, q;\n}\n"
               : "=r"(any) : "r"(unsigned(pred)), "n"(kId) : "memory");
  return any != 0;
#else
  asm volatile("bar.sync %0, 128;\n" ::"n"(kId) : "memory");
  return pred;
#endif
}
__global__ void steps(const int4* src, int* out, int n) {
  __shared__ int4 buf[2][256];
  const int tid = threadIdx.x, group = tid / 128;
  buf[0][tid] = make_int4(0, 0, 0, 0);
  int acc = 0;
  for (int t = 0; t < n; ++t) {
#if CP_ASYNC
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#endif
    __syncthreads_or(acc & 1);
#if CP_ASYNC
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(&buf[(t + 1) % 2][tid]));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n cp.async.commit_group;\n" ::"r"(dst), "l"(src + t * 256 + tid)
                 : "memory");
#else
    buf[(t + 1) % 2][tid] = src[t * 256 + tid];
#endif
    const bool any = group == 0 ? group_barrier<1>(acc < 0) : group_barrier<2>(acc < 0);
    if (UNEVEN && group == 0 && (t & 1)) {
      asm volatile("bar.sync 1, 128;\n bar.sync 1, 128;\n" ::: "memory");
    }
    if (UNEVEN && BALANCED && group == 1 && (t & 1)) {
      asm volatile("bar.sync 2, 128;\n bar.sync 2, 128;\n" ::: "memory");
    }
    acc += buf[t % 2][(tid + 128) % 256].x + any;
  }
#if CP_ASYNC
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#endif
  out[tid] = acc;
}
int main() {
  int* out;
  int4* src;
  cudaMalloc(&out, 256 * sizeof(int));
  cudaMalloc(&src, 8 * 256 * sizeof(int4));
  cudaMemset(src, 0, 8 * 256 * sizeof(int4));
  steps<<<1, 256>>>(src, out, 8);
  const cudaError_t e = cudaDeviceSynchronize();
  std::printf("GROUP_RED=%d CP_ASYNC=%d UNEVEN=%d BALANCED=%d: %s\n", GROUP_RED, CP_ASYNC, UNEVEN, BALANCED, cudaGetErrorString(e));
  return e != cudaSuccess;
}
