// Does a cp.async with an L2 cache policy run on this GPU and toolchain?
//
// Session 22's evict-first gather (docs/perf_notes.md) stopped with
// cudaErrorIllegalInstruction. nvdisasm showed some of its copies as
// `LDGSTS [R+UR0+imm], desc[UR1]`, with nothing in the kernel writing UR0 or
// UR1, and this kernel compiles to the same form (sm_90a, CUDA 13.0). Each
// thread here copies 16 bytes of each 4 KB chunk into shared memory with
// `createpolicy.fractional.L2::evict_first` + `cp.async ... L2::cache_hint`,
// then writes the chunks back to a second buffer; the host compares them.
//
//   nvcc -std=c++17 -O3 -arch=sm_90a bench/probes/cache_hint_probe.cu -o /tmp/cache_hint_probe
//   /tmp/cache_hint_probe        (prints "ok" or the CUDA error; exit 0 / 1)
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

constexpr int kThreads = 256;          // 16 bytes each: one 4 KB chunk per step
constexpr int kChunks = 8;             // steps, one shared-memory chunk each
constexpr int kChunkBytes = kThreads * 16;

__global__ void copy_with_policy(const char* src, char* dst) {
  extern __shared__ __align__(16) char chunks[];
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(chunks)) + threadIdx.x * 16;
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    asm volatile("cp.async.cg.shared.global.L2::cache_hint.L2::128B [%0], [%1], 16, %2, %3;\n" ::"r"(
                     base + i * kChunkBytes),
                 "l"(src + i * kChunkBytes + threadIdx.x * 16), "r"(16), "l"(policy));
  }
  asm volatile("cp.async.wait_all;" ::: "memory");
  for (int i = 0; i < kChunks; ++i) {
    reinterpret_cast<int4*>(dst + i * kChunkBytes)[threadIdx.x] =
        reinterpret_cast<const int4*>(chunks + i * kChunkBytes)[threadIdx.x];
  }
}

bool check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) std::printf("%s: %s\n", what, cudaGetErrorString(e));
  return e == cudaSuccess;
}

}  // namespace

int main() {
  const size_t bytes = size_t(kChunks) * kChunkBytes;
  std::vector<char> host(bytes), back(bytes, 0);
  for (size_t i = 0; i < bytes; ++i) host[i] = static_cast<char>(i * 131 + 7);
  char *src = nullptr, *dst = nullptr;
  bool ok = check(cudaMalloc(&src, bytes), "cudaMalloc") && check(cudaMalloc(&dst, bytes), "cudaMalloc") &&
            check(cudaMemcpy(src, host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy") &&
            check(cudaMemset(dst, 0, bytes), "cudaMemset");
  if (ok) {
    copy_with_policy<<<1, kThreads, bytes>>>(src, dst);
    ok = check(cudaGetLastError(), "launch") && check(cudaDeviceSynchronize(), "copy_with_policy") &&
         check(cudaMemcpy(back.data(), dst, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  }
  if (ok && back != host) {
    std::printf("copied bytes differ\n");
    ok = false;
  }
  std::printf("%s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
