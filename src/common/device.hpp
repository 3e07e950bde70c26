// Per-device facts the library caches (never a device-0 assumption): the SM
// count used to pick splits, the opt-in shared memory, the arch. Filled once
// per device by kdtree_prepare() or lazily by the first entry point.
#pragma once

#include <cstddef>

namespace kdtree {

struct DeviceInfo {
  int device = -1;           // CUDA ordinal
  int sm_count = 0;          // multiprocessors
  int cc_major = 0;          // compute capability
  int cc_minor = 0;
  int image_arch = 0;        // __CUDA_ARCH__ of the kernel image it runs (probe_kernel_image):
                             // which kernel bodies exist, so which paths the host may take
  size_t smem_optin = 0;     // max dynamic shared memory per block (opt-in)
};

// Info of the calling thread's current device, prepared (kernel attributes
// set) on first use. Throws NO_DEVICE when there is no driver or GPU and
// ARCH_NOT_BUILT when no kernel image in this library runs on the device.
// `function` names the entry point for the message.
const DeviceInfo& current_device(const char* function);

// Same for an explicit ordinal (kdtree_prepare / kdtree_device_supported).
const DeviceInfo& prepared_device(int device, const char* function);

}  // namespace kdtree
