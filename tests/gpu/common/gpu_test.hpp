// Shared helpers of the GPU tests: error checks, the skip-without-GPU rule,
// a seeded RNG, dtype encodings (the library's own host conversions), device
// buffers with canary guard bands, and the one-line summary every test prints.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kdtree_kernels.h"

// A failing CUDA call or library status ends the test (exit 1) with the call,
// the place and the message.
#define CUDA_CHECK(expr) ::kdtest::check_cuda((expr), #expr, __FILE__, __LINE__)
#define KDTREE_CHECK(expr) ::kdtest::check_status((expr), #expr, __FILE__, __LINE__)

namespace kdtest {

// Every byte of an output buffer before a device call; what the call must
// not write (rows of no request, a skipped request) keeps it.
constexpr uint8_t kOutputSentinel = 0x5A;

void check_cuda(cudaError_t result, const char* expr, const char* file, int line);
void check_status(kdtree_status status, const char* expr, const char* file, int line);

// Exits 77 (ctest: skipped) when there is no usable CUDA device.
void require_gpu_or_skip(const char* test_name);

// Host to device, complete on return: from pageable memory cudaMemcpy may
// return with its DMA still in flight, and work on a non-blocking stream (the
// graph tests') is not ordered after it.
void upload(void* device, const void* host, size_t bytes);

// ---- light mode under compute-sanitizer ----
// scripts/gpu_check.sh sets KDTREE_TEST_SANITIZER for its compute-sanitizer
// runs, where kernels run 10-1000x slower. The tests then keep every kind of
// case (mask kinds, dtypes, tail sources, edge and error cases) and shrink
// only what adds repetitions: counts, repeats, prefix lengths. Without the
// variable the full counts run.
bool sanitizer_light();
// n_full normally, n_light under a sanitizer.
template <class T>
T scaled(T n_full, T n_light) { return sanitizer_light() ? n_light : n_full; }
// Under a sanitizer prints "<test>: light mode (KDTREE_TEST_SANITIZER): <what>".
void announce_light(const char* test_name, const char* what);

// splitmix64: fast enough to fill 128k-slot caches, seeded from
// KDTREE_TEST_SEED or the clock (the seed is printed by Report).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  float uniform(float lo, float hi);
  int64_t range(int64_t lo, int64_t hi_inclusive);
  template <class T>
  const T& pick(const std::vector<T>& options) { return options[size_t(range(0, int64_t(options.size()) - 1))]; }

 private:
  uint64_t state_;
};

uint64_t test_seed();

// Counts cases and failures, tracks the largest error, prints one line.
class Report {
 public:
  explicit Report(const char* name);
  // Records a failure with a message when !ok; returns ok.
  bool check(bool ok, const std::string& what);
  void error(double value) { if (value > max_error_) max_error_ = value; }
  void add_case() { ++cases_; }
  int cases() const { return cases_; }
  // Prints "<name>: <cases> cases, <failures> failures, max error <e> (seed <s>)"
  // and returns the exit code (0 or 1).
  int finish() const;

 private:
  const char* name_;
  int cases_ = 0;
  int failures_ = 0;
  double max_error_ = 0.0;
};

// ---- dtypes ----

size_t dtype_bytes(int32_t dtype);
// value -> element `index` of `base` in dtype (fp8: value / kv_scale encoded).
void encode(float value, int32_t dtype, void* base, size_t index, float kv_scale = 1.0f);
float decode(const void* base, size_t index, int32_t dtype, float kv_scale = 1.0f);
// A NaN of dtype (fp8 0x7f), for poisoning.
void encode_nan(int32_t dtype, void* base, size_t index);

// ---- calls ----

// kdtree_merge_attention_states over dense f32 states [states][tokens][heads][dim]
// (lse [states][tokens][heads]) into out [tokens][heads][dim] of out_dtype and
// out_lse [tokens][heads].
kdtree_merge_params dense_merge_params(int states, int64_t tokens, int heads, int dim, const void* values,
                                       const float* values_lse, void* out, int32_t out_dtype, float* out_lse);

// ---- device memory ----

// Device bytes with kGuardBytes of canary before and after. Non-copyable.
class DeviceBuffer {
 public:
  static constexpr size_t kGuardBytes = 256;
  static constexpr uint8_t kCanary = 0xC5;

  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;

  void* data() const { return base_ ? static_cast<uint8_t*>(base_) + kGuardBytes : nullptr; }
  template <class T>
  T* as() const { return static_cast<T*>(data()); }
  size_t size() const { return bytes_; }

  void upload(const void* host, size_t bytes);  // bytes <= size(); complete on return
  template <class T>
  void upload(const std::vector<T>& host) { upload(host.data(), host.size() * sizeof(T)); }
  void fill(uint8_t byte);
  std::vector<uint8_t> download() const;
  bool guards_intact() const;

 private:
  void* base_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace kdtest
