#include "api/validate.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace kdtree::api {

std::string dtype_name(int32_t dtype) {
  switch (dtype) {
    case KDTREE_DTYPE_F32: return "KDTREE_DTYPE_F32";
    case KDTREE_DTYPE_BF16: return "KDTREE_DTYPE_BF16";
    case KDTREE_DTYPE_F16: return "KDTREE_DTYPE_F16";
    case KDTREE_DTYPE_FP8_E4M3: return "KDTREE_DTYPE_FP8_E4M3";
    case KDTREE_DTYPE_INT32: return "KDTREE_DTYPE_INT32";
    case KDTREE_DTYPE_INT64: return "KDTREE_DTYPE_INT64";
    default: return std::to_string(dtype);
  }
}

size_t dtype_bytes(int32_t dtype) {
  switch (dtype) {
    case KDTREE_DTYPE_F32: return 4;
    case KDTREE_DTYPE_BF16: return 2;
    case KDTREE_DTYPE_F16: return 2;
    case KDTREE_DTYPE_FP8_E4M3: return 1;
    case KDTREE_DTYPE_INT32: return 4;
    case KDTREE_DTYPE_INT64: return 8;
    default: return 0;
  }
}

void Checker::fail(kdtree_status status, const std::string& what) const {
  kdtree::fail(status, function_, what);
}

void Checker::not_null(const void* pointer, const char* name) const {
  if (pointer == nullptr) fail(KDTREE_ERROR_INVALID_ARGUMENT, std::string(name) + " is NULL");
}

void Checker::struct_size(uint32_t got, size_t expected, const char* struct_name) const {
  // Only the exact size is known: a newer caller's larger struct may carry
  // fields this library would silently ignore, so it is refused too.
  if (got != expected) {
    fail(KDTREE_ERROR_STRUCT_VERSION, "struct_size = " + std::to_string(got) + " is not sizeof(" +
                                          struct_name + ") = " + std::to_string(expected) +
                                          " of this library (call the _params_init function)");
  }
}

void Checker::in_range(int64_t value, int64_t lo, int64_t hi, const char* name) const {
  if (value < lo || value > hi) {
    fail(KDTREE_ERROR_INVALID_ARGUMENT, std::string(name) + " = " + std::to_string(value) +
                                            " is out of range [" + std::to_string(lo) + ", " +
                                            std::to_string(hi) + "]");
  }
}

void Checker::built_range(int64_t value, int64_t lo, int64_t hi, const char* name) const {
  if (value > hi) {
    fail(KDTREE_ERROR_UNSUPPORTED, std::string(name) + " = " + std::to_string(value) +
                                       " is out of range [" + std::to_string(lo) + ", " +
                                       std::to_string(hi) + "]");
  }
  in_range(value, lo, hi, name);
}

void Checker::at_least(int64_t value, int64_t lo, const char* name) const {
  if (value < lo) {
    fail(KDTREE_ERROR_INVALID_ARGUMENT,
         std::string(name) + " = " + std::to_string(value) + " is less than " + std::to_string(lo));
  }
}

void Checker::finite(float value, const char* name) const {
  if (!std::isfinite(value)) fail(KDTREE_ERROR_INVALID_ARGUMENT, std::string(name) + " is not finite");
}

void Checker::zero(int32_t value, const char* name) const {
  if (value != 0) {
    fail(KDTREE_ERROR_INVALID_ARGUMENT,
         std::string(name) + " = " + std::to_string(value) + " is reserved and must be 0");
  }
}

void Checker::dtype_in(int32_t dtype, std::initializer_list<int32_t> allowed, const char* name) const {
  if (std::find(allowed.begin(), allowed.end(), dtype) != allowed.end()) return;
  std::string list;
  for (int32_t a : allowed) list += (list.empty() ? "" : ", ") + dtype_name(a);
  if (dtype_bytes(dtype) == 0) {
    fail(KDTREE_ERROR_INVALID_ARGUMENT,
         std::string(name) + " = " + std::to_string(dtype) + " is not a KDTREE_DTYPE_* value");
  }
  fail(KDTREE_ERROR_UNSUPPORTED,
       std::string(name) + " = " + dtype_name(dtype) + " is not supported here (" + list + ")");
}

void Checker::enum_in(int32_t value, int32_t lo, int32_t hi, const char* name) const {
  in_range(value, lo, hi, name);
}

void Checker::aligned(const void* pointer, size_t alignment, const char* name) const {
  if (reinterpret_cast<uintptr_t>(pointer) % alignment != 0) {
    fail(KDTREE_ERROR_MISALIGNED,
         std::string(name) + " is not " + std::to_string(alignment) + "-byte aligned");
  }
}

void Checker::rows_aligned(const void* base, std::initializer_list<Dim> dims, size_t element_bytes,
                           const char* tensor) const {
  constexpr size_t kAlignment = 16;  // the kernels' vector bytes
  aligned(base, kAlignment, tensor);
  const int64_t multiple = static_cast<int64_t>(kAlignment / element_bytes);
  for (const Dim& dim : dims) {
    if (multiple > 1 && dim.stride % multiple != 0) {
      fail(KDTREE_ERROR_MISALIGNED, std::string(dim.stride_name) + " = " + std::to_string(dim.stride) +
                                        " is not a multiple of " + std::to_string(multiple) +
                                        " elements (rows must stay " + std::to_string(kAlignment) +
                                        "-byte aligned)");
    }
  }
}

int64_t Checker::product(int64_t a, int64_t b, const char* what) const {
  int64_t result = 0;
  if (__builtin_mul_overflow(a, b, &result)) {
    fail(KDTREE_ERROR_INVALID_ARGUMENT, std::string(what) + " overflows int64");
  }
  return result;
}

int64_t Checker::strided_span(std::initializer_list<Dim> dims, int64_t row, size_t element_bytes,
                              const char* tensor) const {
  std::vector<Dim> used;
  for (const Dim& d : dims) {
    if (d.stride < 0) {
      fail(KDTREE_ERROR_INVALID_ARGUMENT,
           std::string(d.stride_name) + " = " + std::to_string(d.stride) + " is negative");
    }
    if (d.extent > 1) used.push_back(d);
  }
  // Innermost first: each stride must step over everything inside it, which
  // is exactly "no two rows overlap" for a strided layout.
  std::stable_sort(used.begin(), used.end(),
                   [](const Dim& a, const Dim& b) { return a.stride < b.stride; });
  int64_t span = row;
  for (const Dim& d : used) {
    if (d.stride < span) {
      fail(KDTREE_ERROR_INVALID_ARGUMENT, std::string(d.stride_name) + " = " +
                                              std::to_string(d.stride) + " makes rows of " +
                                              tensor + " overlap (needs >= " +
                                              std::to_string(span) + ")");
    }
    int64_t reach = 0;
    if (__builtin_mul_overflow(d.extent - 1, d.stride, &reach) ||
        __builtin_add_overflow(reach, span, &span)) {
      fail(KDTREE_ERROR_INVALID_ARGUMENT,
           std::string(tensor) + " offsets overflow int64 (" + d.stride_name + ")");
    }
  }
  int64_t bytes = 0;
  if (__builtin_mul_overflow(span, static_cast<int64_t>(element_bytes), &bytes)) {
    fail(KDTREE_ERROR_INVALID_ARGUMENT, std::string(tensor) + " byte offsets overflow int64");
  }
  return span;
}

void Checker::workspace(const void* workspace, size_t given, size_t needed,
                        const char* size_query) const {
  if (needed == 0) return;
  if (workspace == nullptr) {
    fail(KDTREE_ERROR_WORKSPACE_TOO_SMALL, "workspace is NULL but " + std::string(size_query) +
                                               " needs " + std::to_string(needed) + " bytes");
  }
  if (given < needed) {
    fail(KDTREE_ERROR_WORKSPACE_TOO_SMALL, "workspace_bytes = " + std::to_string(given) +
                                               " is less than the " + std::to_string(needed) +
                                               " bytes " + size_query + " reports");
  }
  aligned(workspace, 16, "workspace");
}

}  // namespace kdtree::api
