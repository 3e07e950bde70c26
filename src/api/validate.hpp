// Argument checks shared by the entry points in src/api. Each throws
// kdtree::Error with "<function>: <argument> <reason>" and the status SPEC
// section 4 gives that kind of mistake; none touches device memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "common/error.hpp"
#include "kdtree_kernels.h"

namespace kdtree::api {

// Head-count and draft-length bounds the verify kernels are built for.
inline constexpr int32_t kMaxHeads = 128;
inline constexpr int32_t kMaxBatch = 65535;  // verify grid.z
inline constexpr int32_t kMaxQLen = 128;
// Largest merge head_dim (value dim).
inline constexpr int32_t kMaxMergeHeadDim = 1024;
// Most layers one defrag copy takes (the copy kernels count layers in int32).
inline constexpr int32_t kMaxLayers = 1 << 20;
// Largest pool the host planner and statistics take (they map a byte per slot).
inline constexpr int64_t kMaxPlannerSlots = int64_t{1} << 40;

// "KDTREE_DTYPE_BF16", or the number for a value outside the enum.
std::string dtype_name(int32_t dtype);
size_t dtype_bytes(int32_t dtype);  // 0 for an unknown dtype

// One dimension of a strided tensor: `extent` indices, `stride` elements apart.
struct Dim {
  const char* stride_name;  // e.g. "q_stride_token"
  int64_t extent;
  int64_t stride;
};

class Checker {
 public:
  explicit Checker(const char* function) : function_(function) {}

  [[noreturn]] void fail(kdtree_status status, const std::string& what) const;

  void not_null(const void* pointer, const char* name) const;
  void struct_size(uint32_t got, size_t expected, const char* struct_name) const;
  // lo <= value <= hi, else INVALID_ARGUMENT "name = v is out of range [lo, hi]".
  void in_range(int64_t value, int64_t lo, int64_t hi, const char* name) const;
  // Below lo is INVALID_ARGUMENT (a mistake), above hi UNSUPPORTED (a bound of
  // what is built); both say "name = v is out of range [lo, hi]".
  void built_range(int64_t value, int64_t lo, int64_t hi, const char* name) const;
  void at_least(int64_t value, int64_t lo, const char* name) const;
  void finite(float value, const char* name) const;
  void zero(int32_t value, const char* name) const;  // reserved fields
  // A known dtype that is not among `allowed` is UNSUPPORTED; a value that is
  // no KDTREE_DTYPE_* at all is INVALID_ARGUMENT.
  void dtype_in(int32_t dtype, std::initializer_list<int32_t> allowed, const char* name) const;
  void enum_in(int32_t value, int32_t lo, int32_t hi, const char* name) const;

  // MISALIGNED unless `pointer` is a multiple of `alignment` bytes.
  void aligned(const void* pointer, size_t alignment, const char* name) const;
  // A strided tensor's rows, moved as 16-byte vectors: MISALIGNED unless its
  // base (named `tensor`) and every stride keep each row 16-byte aligned.
  void rows_aligned(const void* base, std::initializer_list<Dim> dims, size_t element_bytes,
                    const char* tensor) const;

  // Rows of `row` elements at sum(index_i * stride_i) must not overlap and the
  // last byte's offset must fit in int64. Negative strides are rejected.
  // Returns the span in elements.
  int64_t strided_span(std::initializer_list<Dim> dims, int64_t row, size_t element_bytes,
                       const char* tensor) const;

  // a * b (* c) without int64 overflow, else INVALID_ARGUMENT naming `what`.
  int64_t product(int64_t a, int64_t b, const char* what) const;

  void workspace(const void* workspace, size_t given, size_t needed, const char* size_query) const;

 private:
  const char* function_;
};

}  // namespace kdtree::api
