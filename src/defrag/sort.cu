// Device sort of a slot list (the sorted free list), in place, with CUB's
// radix sort over only the bits slot ids can use.
//
// Workspace layout (all from host fields, so capture-stable):
//   [0, keys_bytes)                 a copy of the input keys (CUB sorts
//                                   out of place: copy -> sort back)
//   [keys_bytes, + cub_temp_bytes)  CUB temporary storage
// Keys are sorted as the signed integers they are: slot ids are non-negative,
// so CUB's sign-bit flip lies above end_bit and changes no order. (Unsigned
// 32-bit keys make CUB's onesweep kernel spill on sm_120 with CUDA 13.0.)
#include <cuda_runtime.h>

#include <cub/device/device_radix_sort.cuh>

#include <cstdint>

#include "common/cuda_check.hpp"
#include "defrag/defrag_launch.hpp"

namespace kdtree::defrag {
namespace {

constexpr size_t kAlignment = 256;
constexpr const char* kFunction = "kdtree_sort_slots";

size_t align_up(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

// Bits needed to hold num_slots - 1 (at least 1).
int end_bit_for(int64_t num_slots) {
  int bits = 1;
  while (bits < 63 && (int64_t{1} << bits) < num_slots) ++bits;
  return bits;
}

template <class Key>
size_t cub_temp_bytes(int64_t count, int end_bit, const char* function) {
  size_t bytes = 0;
  check_cuda(cub::DeviceRadixSort::SortKeys(nullptr, bytes, static_cast<const Key*>(nullptr),
                                            static_cast<Key*>(nullptr), count, 0, end_bit),
             function, "cub::DeviceRadixSort::SortKeys (size query)");
  return bytes;
}

template <class Key>
void sort_keys(Key* slots, int64_t count, int64_t num_slots, void* workspace,
               size_t workspace_bytes, cudaStream_t stream) {
  const int end_bit = end_bit_for(num_slots);
  const size_t keys_bytes = align_up(static_cast<size_t>(count) * sizeof(Key));
  Key* keys_copy = static_cast<Key*>(workspace);
  void* temp = static_cast<char*>(workspace) + keys_bytes;
  size_t temp_bytes = workspace_bytes - keys_bytes;
  check_cuda(cudaMemcpyAsync(keys_copy, slots, static_cast<size_t>(count) * sizeof(Key),
                             cudaMemcpyDeviceToDevice, stream),
             kFunction, "cudaMemcpyAsync (keys to workspace)");
  check_cuda(cub::DeviceRadixSort::SortKeys(temp, temp_bytes, keys_copy, slots, count, 0, end_bit,
                                            stream),
             kFunction, "cub::DeviceRadixSort::SortKeys");
}

}  // namespace

size_t sort_workspace_bytes(int32_t index_dtype, int64_t count, int64_t num_slots, const char* function) {
  if (count <= 1) return 0;  // nothing to sort
  const int end_bit = end_bit_for(num_slots);
  if (index_dtype == KDTREE_DTYPE_INT64) {
    return align_up(static_cast<size_t>(count) * sizeof(int64_t)) +
           cub_temp_bytes<int64_t>(count, end_bit, function);
  }
  return align_up(static_cast<size_t>(count) * sizeof(int32_t)) +
         cub_temp_bytes<int32_t>(count, end_bit, function);
}

void launch_sort(void* slots, int32_t index_dtype, int64_t count, int64_t num_slots,
                 void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (count <= 1) return;
  if (index_dtype == KDTREE_DTYPE_INT64) {
    sort_keys(static_cast<int64_t*>(slots), count, num_slots, workspace, workspace_bytes, stream);
  } else {
    sort_keys(static_cast<int32_t*>(slots), count, num_slots, workspace, workspace_bytes, stream);
  }
}

}  // namespace kdtree::defrag
