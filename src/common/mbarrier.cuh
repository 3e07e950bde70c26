// Shared-memory mbarriers (sm_90+): a phase completes once its expected
// number of arrivals has arrived; waiters name the phase by its parity. Used
// by the defrag copy's bulk-copy pipes, the sm_90a ping-pong verify kernel's
// KV stages and warpgroup hand-offs, the single-warpgroup kernel's P hand-off,
// and bench/wgmma_smem_rates.cu. Callers
// compile these only for __CUDA_ARCH__ >= 900.
#pragma once

#include <cstdint>

namespace kdtree {

// (Declared for the host pass too: callers name its template argument.)
template <uint32_t kSuspendNs>
__device__ __forceinline__ bool mbarrier_warp_done(uint32_t barrier, uint32_t parity);

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

__device__ __forceinline__ void mbarrier_init(uint32_t barrier, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(barrier), "r"(arrivals) : "memory");
}

// Makes initialised barriers visible to the other threads and to the async
// proxy (bulk copies); a block barrier must follow before any use.
__device__ __forceinline__ void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// One arrival (release: this thread's earlier shared-memory writes are
// visible to whoever waits for the phase).
__device__ __forceinline__ void mbarrier_arrive(uint32_t barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(barrier) : "memory");
}

// One arrival once every cp.async this thread issued so far has completed
// (the barrier's expected count includes it: .noinc).
__device__ __forceinline__ void mbarrier_arrive_on_cp_async(uint32_t barrier) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(barrier) : "memory");
}

// One arrival that also expects `bytes` more of bulk copies (complete_tx)
// before the phase completes.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t barrier, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(barrier), "r"(bytes) : "memory");
}

// `bytes` (a multiple of 16) from global `from` into shared `to` by the
// bulk-copy engine; the barrier's transaction count falls by them on landing.
__device__ __forceinline__ void bulk_copy_to_shared(uint32_t to, const void* from, uint32_t bytes, uint32_t barrier) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(to),
               "l"(from), "r"(bytes), "r"(barrier)
               : "memory");
}

// `bytes` (a multiple of 16) from shared `from` to global `to` by the
// bulk-copy engine, as one committed bulk group of this thread's (its
// wait_group counts it). The writers of `from` fenced their writes for the
// async proxy (fence.proxy.async) before a barrier this thread passed.
__device__ __forceinline__ void bulk_store_to_global(void* to, uint32_t from, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(to), "r"(from), "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// bulk_store_to_global, then a wait until every bulk group of this thread
// has read its source (the block may then exit or reuse it; the global
// writes complete with the grid).
__device__ __forceinline__ void bulk_copy_to_global(void* to, uint32_t from, uint32_t bytes) {
  bulk_store_to_global(to, from, bytes);
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}

// Whether the phase of parity `parity` has completed (acquire), after one
// potentially blocking poll.
__device__ __forceinline__ bool mbarrier_try_wait(uint32_t barrier, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(barrier), "r"(parity)
      : "memory");
  return done != 0;
}

// Whether the phase of parity `parity` has completed (acquire), at once.
__device__ __forceinline__ bool mbarrier_test_wait(uint32_t barrier, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(barrier), "r"(parity)
      : "memory");
  return done != 0;
}

// mbarrier_try_wait with the poll suspended for at most `suspend_ns`.
__device__ __forceinline__ bool mbarrier_try_wait_for(uint32_t barrier, uint32_t parity, uint32_t suspend_ns) {
  uint32_t done;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(barrier), "r"(parity), "r"(suspend_ns)
      : "memory");
  return done != 0;
}

// Spins until the phase of parity `parity` has completed (acquire).
__device__ __forceinline__ void mbarrier_wait(uint32_t barrier, uint32_t parity) {
  while (!mbarrier_try_wait(barrier, parity)) {
  }
}

// Whether the phase of parity `parity` has completed, the same answer in
// every lane of the warp (each lane's own poll, suspended for up to
// kSuspendNs or, with 0, a test; a lane that saw it incomplete then waits,
// at once, for its own acquire).
template <uint32_t kSuspendNs>
__device__ __forceinline__ bool mbarrier_warp_done(uint32_t barrier, uint32_t parity) {
  const bool done =
      kSuspendNs == 0 ? mbarrier_test_wait(barrier, parity) : mbarrier_try_wait_for(barrier, parity, kSuspendNs);
  if (!__any_sync(0xffffffffu, done)) return false;
  mbarrier_wait(barrier, parity);
  return true;
}

#endif  // __CUDA_ARCH__ >= 900

}  // namespace kdtree
