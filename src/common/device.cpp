// The per-device cache behind kdtree::current_device() / prepared_device().
//
// The first call for a device reads its attributes, checks that this build
// has a kernel image for it and lets the verify kernels set their attributes
// (opt-in shared memory). Later calls take one acquire load. Everything here
// is legal during stream capture: cudaGetDevice, attribute queries and
// cudaFuncGetAttributes enqueue nothing.
#include "common/device.hpp"

#include <cuda_runtime_api.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/arch_probe.hpp"
#include "common/cuda_check.hpp"
#include "common/error.hpp"
#include "verify/verify_launch.hpp"

namespace kdtree {

namespace {

std::string cuda_error_text(cudaError_t result) {
  return std::string(cudaGetErrorName(result)) + ": " + cudaGetErrorString(result);
}

// Device count, asked once: without a driver or GPU the answer (an error)
// does not change while the process lives.
struct DeviceCount {
  int count = 0;
  cudaError_t error = cudaSuccess;
};

const DeviceCount& device_count() {
  static const DeviceCount cached = [] {
    DeviceCount result;
    result.error = cudaGetDeviceCount(&result.count);
    if (result.error != cudaSuccess) {
      result.count = 0;
      cudaGetLastError();  // do not leave the failure for a later launch check
    } else if (result.count == 0) {
      result.error = cudaErrorNoDevice;
    }
    return result;
  }();
  return cached;
}

int checked_device_count(const char* function) {
  const DeviceCount& devices = device_count();
  if (devices.error != cudaSuccess) {
    fail(KDTREE_ERROR_NO_DEVICE, function,
         "no CUDA device (cuda error " + cuda_error_text(devices.error) + ")");
  }
  return devices.count;
}

struct DeviceSlot {
  std::mutex mutex;
  std::atomic<bool> ready{false};
  DeviceInfo info;
};

std::vector<std::unique_ptr<DeviceSlot>>& device_slots(int count) {
  static std::vector<std::unique_ptr<DeviceSlot>> slots = [count] {
    std::vector<std::unique_ptr<DeviceSlot>> made;
    for (int i = 0; i < count; ++i) made.push_back(std::make_unique<DeviceSlot>());
    return made;
  }();
  return slots;
}

int attribute(cudaDeviceAttr attr, int device, const char* function, const char* what) {
  int value = 0;
  check_cuda(cudaDeviceGetAttribute(&value, attr, device), function, what);
  return value;
}

// Runs with `device` current.
DeviceInfo probe(int device, const char* function) {
  DeviceInfo info;
  info.device = device;
  info.sm_count = attribute(cudaDevAttrMultiProcessorCount, device, function,
                            "cudaDeviceGetAttribute(MultiProcessorCount)");
  info.cc_major = attribute(cudaDevAttrComputeCapabilityMajor, device, function,
                            "cudaDeviceGetAttribute(ComputeCapabilityMajor)");
  info.cc_minor = attribute(cudaDevAttrComputeCapabilityMinor, device, function,
                            "cudaDeviceGetAttribute(ComputeCapabilityMinor)");
  info.smem_optin = static_cast<size_t>(attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, device,
                                                  function,
                                                  "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)"));

  const cudaError_t image = probe_kernel_image(&info.image_arch);
  if (image != cudaSuccess) {
    cudaGetLastError();  // the missing image is reported here, not at the next launch
    if (image == cudaErrorNoKernelImageForDevice || image == cudaErrorInvalidDeviceFunction ||
        image == cudaErrorUnsupportedPtxVersion || image == cudaErrorInvalidPtx) {
      fail(KDTREE_ERROR_ARCH_NOT_BUILT, function,
           "device " + std::to_string(device) + " is sm_" + std::to_string(info.cc_major) +
               std::to_string(info.cc_minor) + ", this library is built for sm " KDTREE_BUILT_SMS
               " (ptx " KDTREE_PTX_SMS ") (cuda error " + cuda_error_text(image) + ")");
    }
    check_cuda(image, function, "cudaFuncGetAttributes(arch probe)");
  }
  return info;
}

// Makes `device` current for the lifetime of the object, then restores.
class ScopedDevice {
 public:
  ScopedDevice(int device, const char* function) {
    check_cuda(cudaGetDevice(&previous_), function, "cudaGetDevice");
    if (previous_ != device) check_cuda(cudaSetDevice(device), function, "cudaSetDevice");
  }
  ~ScopedDevice() {
    int now = -1;
    if (cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
  }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace

const DeviceInfo& prepared_device(int device, const char* function) {
  const int count = checked_device_count(function);
  if (device < 0 || device >= count) {
    fail(KDTREE_ERROR_INVALID_ARGUMENT, function,
         "device = " + std::to_string(device) + " is out of range [0, " + std::to_string(count) + ")");
  }
  DeviceSlot& slot = *device_slots(count)[static_cast<size_t>(device)];
  if (slot.ready.load(std::memory_order_acquire)) return slot.info;

  std::lock_guard<std::mutex> lock(slot.mutex);
  if (!slot.ready.load(std::memory_order_relaxed)) {
    // A failure (missing image, CUDA error) leaves the slot unprepared, so
    // every later call reports it again with its own function name.
    ScopedDevice current(device, function);
    slot.info = probe(device, function);
    verify::prepare_kernels(slot.info, function);
    slot.ready.store(true, std::memory_order_release);
  }
  return slot.info;
}

const DeviceInfo& current_device(const char* function) {
  checked_device_count(function);
  int device = -1;
  check_cuda(cudaGetDevice(&device), function, "cudaGetDevice");
  return prepared_device(device, function);
}

}  // namespace kdtree
