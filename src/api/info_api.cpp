// extern "C" version, status, build and device queries. None of these touch a
// GPU except kdtree_prepare / kdtree_device_supported.
#include <cuda_runtime_api.h>

#include <cstring>
#include <string>

#include "api/validate.hpp"
#include "common/device.hpp"
#include "common/error.hpp"

#ifndef KDTREE_BUILT_SMS
#error "KDTREE_BUILT_SMS (the compiled SM list) comes from CMake"
#endif
#ifndef KDTREE_PTX_SMS
#error "KDTREE_PTX_SMS (the SMs shipped as PTX) comes from CMake"
#endif

namespace {


#ifdef KDTREE_FORCE_SM120_CONFIG
#define KDTREE_VERIFY_PATHS " verify-config sm120-forced"
#else
#define KDTREE_VERIFY_PATHS ""
#endif

// CUDART_VERSION is major * 1000 + minor * 10.
constexpr int kCudaMajor = CUDART_VERSION / 1000;
constexpr int kCudaMinor = (CUDART_VERSION % 1000) / 10;

const std::string& build_info_text() {
  static const std::string text = std::string("kdtree_kernels " KDTREE_VERSION_STRING " cuda ") +
                                  std::to_string(kCudaMajor) + "." + std::to_string(kCudaMinor) +
                                  " sm " KDTREE_BUILT_SMS " ptx " KDTREE_PTX_SMS KDTREE_VERIFY_PATHS;
  return text;
}

struct StructSize {
  const char* name;
  size_t size;
};

constexpr StructSize kStructSizes[] = {
    {"kdtree_verify_paged_params", sizeof(kdtree_verify_paged_params)},
    {"kdtree_verify_contiguous_params", sizeof(kdtree_verify_contiguous_params)},
    {"kdtree_merge_params", sizeof(kdtree_merge_params)},
    {"kdtree_defrag_copy_params", sizeof(kdtree_defrag_copy_params)},
    {"kdtree_defrag_remap_params", sizeof(kdtree_defrag_remap_params)},
    {"kdtree_defrag_plan_params", sizeof(kdtree_defrag_plan_params)},
    {"kdtree_fragmentation_stats", sizeof(kdtree_fragmentation_stats)},
};

}  // namespace

using kdtree::api::Checker;

extern "C" {

KDTREE_API int32_t kdtree_version_number(void) { return KDTREE_VERSION_NUMBER; }

KDTREE_API const char* kdtree_version_string(void) { return KDTREE_VERSION_STRING; }

KDTREE_API int32_t kdtree_abi_version(void) { return KDTREE_ABI_VERSION; }

KDTREE_API const char* kdtree_status_string(kdtree_status status) {
  switch (status) {
    case KDTREE_OK: return "KDTREE_OK";
    case KDTREE_ERROR_INVALID_ARGUMENT: return "KDTREE_ERROR_INVALID_ARGUMENT";
    case KDTREE_ERROR_UNSUPPORTED: return "KDTREE_ERROR_UNSUPPORTED";
    case KDTREE_ERROR_MISALIGNED: return "KDTREE_ERROR_MISALIGNED";
    case KDTREE_ERROR_WORKSPACE_TOO_SMALL: return "KDTREE_ERROR_WORKSPACE_TOO_SMALL";
    case KDTREE_ERROR_STRUCT_VERSION: return "KDTREE_ERROR_STRUCT_VERSION";
    case KDTREE_ERROR_NO_DEVICE: return "KDTREE_ERROR_NO_DEVICE";
    case KDTREE_ERROR_ARCH_NOT_BUILT: return "KDTREE_ERROR_ARCH_NOT_BUILT";
    case KDTREE_ERROR_CUDA: return "KDTREE_ERROR_CUDA";
    case KDTREE_ERROR_INTERNAL: return "KDTREE_ERROR_INTERNAL";
    default: return "KDTREE_STATUS_UNKNOWN";
  }
}

KDTREE_API const char* kdtree_build_info(void) {
  try {
    return build_info_text().c_str();
  } catch (...) {
    return "kdtree_kernels " KDTREE_VERSION_STRING;  // allocation failed: still no throw
  }
}

KDTREE_API kdtree_status kdtree_struct_size(const char* struct_name, size_t* size) {
  const char* fn = "kdtree_struct_size";
  return kdtree::guard(fn, [&] {
    const Checker c(fn);
    c.not_null(struct_name, "struct_name");
    c.not_null(size, "size");
    for (const StructSize& entry : kStructSizes) {
      if (std::strcmp(entry.name, struct_name) == 0) {
        *size = entry.size;
        return;
      }
    }
    c.fail(KDTREE_ERROR_INVALID_ARGUMENT,
           std::string("struct_name = \"") + struct_name + "\" is not a public struct of this library");
  });
}

KDTREE_API kdtree_status kdtree_prepare(int32_t device) {
  const char* fn = "kdtree_prepare";
  return kdtree::guard(fn, [&] {
    Checker(fn).at_least(device, 0, "device");
    kdtree::prepared_device(device, fn);
  });
}

KDTREE_API kdtree_status kdtree_device_supported(int32_t device, int32_t* ok) {
  const char* fn = "kdtree_device_supported";
  return kdtree::guard(fn, [&] {
    const Checker c(fn);
    c.not_null(ok, "ok");
    c.at_least(device, 0, "device");
    try {
      kdtree::prepared_device(device, fn);
    } catch (const kdtree::Error& e) {
      // "No image for this arch" is the answer, not a failure; so is an
      // image whose kernels need more shared memory than the device offers
      // (UNSUPPORTED from the preparation: an sm_80-only build on sm_86).
      if (e.status() != KDTREE_ERROR_ARCH_NOT_BUILT && e.status() != KDTREE_ERROR_UNSUPPORTED) throw;
      *ok = 0;
      return;
    }
    *ok = 1;
  });
}

}  // extern "C"
