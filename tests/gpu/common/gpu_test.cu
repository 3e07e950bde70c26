#include "common/gpu_test.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "reference/host_dtype.hpp"

namespace kdtest {

using namespace kdtree::host_dtype;

void check_cuda(cudaError_t result, const char* expr, const char* file, int line) {
  if (result == cudaSuccess) return;
  std::fprintf(stderr, "%s:%d: %s failed: %s\n", file, line, expr, cudaGetErrorString(result));
  std::exit(1);
}

void check_status(kdtree_status status, const char* expr, const char* file, int line) {
  if (status == KDTREE_OK) return;
  std::fprintf(stderr, "%s:%d: %s returned %s: %s\n", file, line, expr, kdtree_status_string(status),
               kdtree_last_error_message());
  std::exit(1);
}

void require_gpu_or_skip(const char* test_name) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("%s: skipped, no CUDA device\n", test_name);
    std::exit(77);
  }
}

bool sanitizer_light() {
  static const bool light = [] {
    const char* env = std::getenv("KDTREE_TEST_SANITIZER");
    return env != nullptr && env[0] != '\0';
  }();
  return light;
}

void announce_light(const char* test_name, const char* what) {
  if (sanitizer_light()) std::printf("%s: light mode (KDTREE_TEST_SANITIZER): %s\n", test_name, what);
}

uint64_t test_seed() {
  static const uint64_t seed = [] {
    if (const char* env = std::getenv("KDTREE_TEST_SEED")) return uint64_t(std::strtoull(env, nullptr, 0));
    return uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  }();
  return seed;
}

uint64_t Rng::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

float Rng::uniform(float lo, float hi) { return lo + (hi - lo) * float(next() >> 40) * 0x1.0p-24f; }

int64_t Rng::range(int64_t lo, int64_t hi_inclusive) {
  return lo + int64_t(next() % uint64_t(hi_inclusive - lo + 1));
}

Report::Report(const char* name) : name_(name) {}

bool Report::check(bool ok, const std::string& what) {
  if (!ok) {
    ++failures_;
    if (failures_ <= 20) std::fprintf(stderr, "%s: FAIL: %s\n", name_, what.c_str());
  }
  return ok;
}

int Report::finish() const {
  std::printf("%s: %d cases, %d failures, max error %.3g (seed %llu)\n", name_, cases_, failures_,
              max_error_, static_cast<unsigned long long>(test_seed()));
  return failures_ == 0 && cases_ > 0 ? 0 : 1;
}

size_t dtype_bytes(int32_t dtype) {
  switch (dtype) {
    case KDTREE_DTYPE_F32:
    case KDTREE_DTYPE_INT32:
      return 4;
    case KDTREE_DTYPE_INT64:
      return 8;
    case KDTREE_DTYPE_FP8_E4M3:
      return 1;
    default:
      return 2;
  }
}

void encode(float value, int32_t dtype, void* base, size_t index, float kv_scale) {
  if (dtype == KDTREE_DTYPE_FP8_E4M3) {
    static_cast<uint8_t*>(base)[index] = float_to_fp8_e4m3(value / kv_scale);
  } else {
    store_element(base, int64_t(index), dtype, value);
  }
}

float decode(const void* base, size_t index, int32_t dtype, float kv_scale) {
  return float(load_element(base, int64_t(index), dtype, kv_scale));
}

void encode_nan(int32_t dtype, void* base, size_t index) {
  if (dtype == KDTREE_DTYPE_FP8_E4M3) {
    static_cast<uint8_t*>(base)[index] = 0x7f;
  } else {
    encode(std::nanf(""), dtype, base, index);
  }
}

kdtree_merge_params dense_merge_params(int states, int64_t tokens, int heads, int dim, const void* values,
                                       const float* values_lse, void* out, int32_t out_dtype, float* out_lse) {
  kdtree_merge_params p;
  KDTREE_CHECK(kdtree_merge_params_init(&p));
  p.num_states = states;
  p.num_tokens = tokens;
  p.num_heads = heads;
  p.head_dim = dim;
  p.states = values;
  p.states_dtype = KDTREE_DTYPE_F32;
  p.states_stride_state = tokens * heads * dim;
  p.states_stride_token = int64_t(heads) * dim;
  p.states_stride_head = dim;
  p.states_lse = values_lse;
  p.out = out;
  p.out_dtype = out_dtype;
  p.out_stride_token = int64_t(heads) * dim;
  p.out_stride_head = dim;
  p.lse = out_lse;
  return p;
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  CUDA_CHECK(cudaMalloc(&base_, bytes + 2 * kGuardBytes));
  CUDA_CHECK(cudaMemset(base_, kCanary, bytes + 2 * kGuardBytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (base_) cudaFree(base_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept : base_(other.base_), bytes_(other.bytes_) {
  other.base_ = nullptr;
  other.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (base_) cudaFree(base_);
    base_ = other.base_;
    bytes_ = other.bytes_;
    other.base_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

void upload(void* device, const void* host, size_t bytes) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaDeviceSynchronize());
}

void DeviceBuffer::upload(const void* host, size_t bytes) {
  if (bytes > bytes_) {
    std::fprintf(stderr, "DeviceBuffer::upload: %zu bytes into a buffer of %zu\n", bytes, bytes_);
    std::exit(1);
  }
  kdtest::upload(data(), host, bytes);
}

void DeviceBuffer::fill(uint8_t byte) {
  if (bytes_) CUDA_CHECK(cudaMemset(data(), byte, bytes_));
}

std::vector<uint8_t> DeviceBuffer::download() const {
  std::vector<uint8_t> host(bytes_);
  if (bytes_) CUDA_CHECK(cudaMemcpy(host.data(), data(), bytes_, cudaMemcpyDeviceToHost));
  return host;
}

bool DeviceBuffer::guards_intact() const {
  if (!base_) return true;
  std::vector<uint8_t> front(kGuardBytes), back(kGuardBytes);
  CUDA_CHECK(cudaMemcpy(front.data(), base_, kGuardBytes, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(back.data(), static_cast<uint8_t*>(base_) + kGuardBytes + bytes_, kGuardBytes,
                        cudaMemcpyDeviceToHost));
  for (size_t k = 0; k < kGuardBytes; ++k)
    if (front[k] != kCanary || back[k] != kCanary) return false;
  return true;
}

}  // namespace kdtest
