// kdtree-info: what this build is, which GPUs it sees, and one real verify.
//
// With a GPU: a kdtree_verify_paged call (B=2, H=16, 16 draft tokens, prefix
// 4096, a random permutation of slots, random trees as TREE_DENSE masks, bf16)
// checked against kdtree_verify_paged_host (fp64) by relative Frobenius
// error, timed with CUDA events (median of 20) and set against the roofline
// floor max(bytes / BW, flops / MMA). Without a GPU: the CPU reference on a
// small case and its checksum. Exit 0 unless a result is wrong or a call fails.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "kdtree_kernels.h"

namespace {

constexpr int kDimLatent = 512;
constexpr int kDim = 576;
// Nominal H200 figures (SPEC section 6); bench/ measures the card's own.
constexpr double kNominalBandwidth = 4.27e12;  // bytes/s, device-to-device copy
constexpr double kNominalMma = 647e12;         // flop/s, mma.sync bf16, fp32 accumulate
constexpr double kMaxRelativeError = 5e-3;

uint16_t to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}

float from_bf16(uint16_t value) {
  const uint32_t bits = static_cast<uint32_t>(value) << 16;
  float result;
  std::memcpy(&result, &bits, sizeof result);
  return result;
}

bool ok(kdtree_status status, const char* call) {
  if (status == KDTREE_OK) return true;
  std::fprintf(stderr, "%s failed: %s: %s\n", call, kdtree_status_string(status),
               kdtree_last_error_message());
  return false;
}

// One verify problem in host memory: TAIL_FROM_INDICES, TREE_DENSE masks.
struct Problem {
  int batch = 0, heads = 0, q_len = 0, prefix = 0;
  int64_t num_slots = 0;
  std::vector<uint16_t> q, kv;      // bf16
  std::vector<int32_t> qo_indptr, kv_indptr, kv_indices;
  std::vector<uint8_t> mask;
  std::vector<int64_t> mask_indptr;
  int64_t visible_tail_keys = 0;    // sum over requests and rows, for flops

  int64_t total_q() const { return int64_t{batch} * q_len; }
};

Problem make_problem(int batch, int heads, int q_len, int prefix, uint32_t seed) {
  Problem p;
  p.batch = batch, p.heads = heads, p.q_len = q_len, p.prefix = prefix;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const int64_t kv_len = prefix + q_len;
  // A pool twice the size needed, handed out in random order: a fragmented
  // page_size-1 cache.
  p.num_slots = 2 * batch * kv_len;
  std::vector<int32_t> pool(static_cast<size_t>(p.num_slots));
  for (int64_t i = 0; i < p.num_slots; ++i) pool[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  std::shuffle(pool.begin(), pool.end(), rng);

  p.q.resize(static_cast<size_t>(p.total_q() * heads * kDim));
  for (auto& x : p.q) x = to_bf16(uniform(rng));
  p.kv.resize(static_cast<size_t>(p.num_slots * kDim));
  for (auto& x : p.kv) x = to_bf16(uniform(rng));

  for (int b = 0; b <= batch; ++b) {
    p.qo_indptr.push_back(b * q_len);
    p.kv_indptr.push_back(static_cast<int32_t>(b * kv_len));
    p.mask_indptr.push_back(int64_t{b} * q_len * q_len);
  }
  p.kv_indices.assign(pool.begin(), pool.begin() + batch * kv_len);

  // Random trees: draft j's parent is an earlier draft or the prefix (-1);
  // row i sees tail key j iff j is i or one of i's ancestors.
  p.mask.assign(static_cast<size_t>(batch * q_len * q_len), 0);
  for (int b = 0; b < batch; ++b) {
    std::vector<int> parent(static_cast<size_t>(q_len));
    for (int j = 0; j < q_len; ++j) {
      parent[static_cast<size_t>(j)] = std::uniform_int_distribution<int>(-1, j - 1)(rng);
    }
    for (int i = 0; i < q_len; ++i) {
      for (int j = i; j >= 0; j = parent[static_cast<size_t>(j)]) {
        p.mask[static_cast<size_t>((b * q_len + i) * q_len + j)] = 1;
        ++p.visible_tail_keys;
      }
    }
  }
  return p;
}

// Params for `p` with the given data pointers (host or device); f32 or bf16 out.
kdtree_verify_paged_params params_for(const Problem& p, const void* q, const void* kv,
                                      const int32_t* qo_indptr, const int32_t* kv_indptr,
                                      const int32_t* kv_indices, const uint8_t* mask,
                                      const int64_t* mask_indptr, void* out, int32_t out_dtype,
                                      float* lse) {
  kdtree_verify_paged_params params;
  kdtree_verify_paged_params_init(&params);
  params.batch_size = p.batch;
  params.num_heads = p.heads;
  params.max_q_len = p.q_len;
  params.total_q = p.total_q();
  params.max_kv_len = p.prefix + p.q_len;
  params.sm_scale = 1.0f / std::sqrt(static_cast<float>(kDim));
  params.q = q;
  params.q_stride_token = int64_t{p.heads} * kDim;
  params.q_stride_head = kDim;
  params.kv_cache = kv;
  params.kv_stride_slot = kDim;
  params.num_slots = p.num_slots;
  params.qo_indptr = qo_indptr;
  params.kv_indptr = kv_indptr;
  params.kv_indices = kv_indices;
  params.mask_kind = KDTREE_MASK_TREE_DENSE;
  params.mask = mask;
  params.mask_indptr = mask_indptr;
  params.out = out;
  params.out_dtype = out_dtype;
  params.out_stride_token = int64_t{p.heads} * kDimLatent;
  params.out_stride_head = kDimLatent;
  params.lse = lse;
  return params;
}

struct HostResult {
  std::vector<float> out, lse;
};

bool run_host(const Problem& p, HostResult* result) {
  result->out.assign(static_cast<size_t>(p.total_q() * p.heads * kDimLatent), 0.0f);
  result->lse.assign(static_cast<size_t>(p.total_q() * p.heads), 0.0f);
  const kdtree_verify_paged_params params =
      params_for(p, p.q.data(), p.kv.data(), p.qo_indptr.data(), p.kv_indptr.data(),
                 p.kv_indices.data(), p.mask.data(), p.mask_indptr.data(), result->out.data(),
                 KDTREE_DTYPE_F32, result->lse.data());
  return ok(kdtree_verify_paged_host(&params), "kdtree_verify_paged_host");
}

int run_without_gpu() {
  std::printf("no GPU found: the GPU path did not run\n");
  const Problem p = make_problem(/*batch=*/1, /*heads=*/2, /*q_len=*/4, /*prefix=*/64, 7);
  HostResult host;
  if (!run_host(p, &host)) return 1;
  double checksum = 0.0;
  for (float x : host.out) checksum += x;
  for (float x : host.lse) checksum += x;
  std::printf("CPU reference (B=1 H=2 q=4 prefix=64, TREE_DENSE, bf16): checksum %.9g\n", checksum);
  return std::isfinite(checksum) ? 0 : 1;
}

#define CUDA_OR_FAIL(call)                                                              \
  do {                                                                                  \
    const cudaError_t result_ = (call);                                                 \
    if (result_ != cudaSuccess) {                                                       \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(result_));     \
      return 1;                                                                         \
    }                                                                                   \
  } while (0)

template <class T>
int to_device(const std::vector<T>& host, T** device) {
  CUDA_OR_FAIL(cudaMalloc(device, host.size() * sizeof(T)));
  CUDA_OR_FAIL(cudaMemcpy(*device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return 0;
}

int run_on_gpu(int device) {
  CUDA_OR_FAIL(cudaSetDevice(device));
  const Problem p = make_problem(/*batch=*/2, /*heads=*/16, /*q_len=*/16, /*prefix=*/4096, 1234);
  std::printf("verify check on device %d: B=%d H=%d q=%d prefix=%d, TREE_DENSE, bf16, "
              "%lld random slots\n",
              device, p.batch, p.heads, p.q_len, p.prefix, static_cast<long long>(p.num_slots));

  uint16_t *q = nullptr, *kv = nullptr, *out = nullptr;
  int32_t *qo_indptr = nullptr, *kv_indptr = nullptr, *kv_indices = nullptr;
  uint8_t* mask = nullptr;
  int64_t* mask_indptr = nullptr;
  float* lse = nullptr;
  if (to_device(p.q, &q) || to_device(p.kv, &kv) || to_device(p.qo_indptr, &qo_indptr) ||
      to_device(p.kv_indptr, &kv_indptr) || to_device(p.kv_indices, &kv_indices) ||
      to_device(p.mask, &mask) || to_device(p.mask_indptr, &mask_indptr)) {
    return 1;
  }
  const size_t out_elems = static_cast<size_t>(p.total_q() * p.heads * kDimLatent);
  CUDA_OR_FAIL(cudaMalloc(&out, out_elems * sizeof(uint16_t)));
  CUDA_OR_FAIL(cudaMalloc(&lse, static_cast<size_t>(p.total_q() * p.heads) * sizeof(float)));

  const kdtree_verify_paged_params params = params_for(
      p, q, kv, qo_indptr, kv_indptr, kv_indices, mask, mask_indptr, out, KDTREE_DTYPE_BF16, lse);
  size_t workspace_bytes = 0;
  if (!ok(kdtree_verify_workspace_size(&params, &workspace_bytes), "kdtree_verify_workspace_size")) {
    return 1;
  }
  void* workspace = nullptr;
  if (workspace_bytes > 0) CUDA_OR_FAIL(cudaMalloc(&workspace, workspace_bytes));
  cudaStream_t stream;
  CUDA_OR_FAIL(cudaStreamCreate(&stream));
  if (!ok(kdtree_verify_paged(&params, workspace, workspace_bytes, stream), "kdtree_verify_paged")) {
    return 1;
  }
  CUDA_OR_FAIL(cudaStreamSynchronize(stream));

  std::vector<uint16_t> gpu_out(out_elems);
  CUDA_OR_FAIL(cudaMemcpy(gpu_out.data(), out, out_elems * sizeof(uint16_t), cudaMemcpyDeviceToHost));
  HostResult host;
  if (!run_host(p, &host)) return 1;
  double diff2 = 0.0, ref2 = 0.0;
  bool finite = true;
  for (size_t i = 0; i < out_elems; ++i) {
    const double g = from_bf16(gpu_out[i]);
    const double r = host.out[i];
    finite = finite && std::isfinite(g);
    diff2 += (g - r) * (g - r);
    ref2 += r * r;
  }
  const double relative_error = std::sqrt(diff2 / std::max(ref2, 1e-300));
  std::printf("relative Frobenius error vs kdtree_verify_paged_host (fp64): %.3e (bar %.0e)\n",
              relative_error, kMaxRelativeError);

  // Time: 3 warm-up calls, then the median of 20 timed ones.
  cudaEvent_t start, stop;
  CUDA_OR_FAIL(cudaEventCreate(&start));
  CUDA_OR_FAIL(cudaEventCreate(&stop));
  std::vector<float> times_ms;
  for (int iteration = 0; iteration < 23; ++iteration) {
    CUDA_OR_FAIL(cudaEventRecord(start, stream));
    if (!ok(kdtree_verify_paged(&params, workspace, workspace_bytes, stream), "kdtree_verify_paged")) {
      return 1;
    }
    CUDA_OR_FAIL(cudaEventRecord(stop, stream));
    CUDA_OR_FAIL(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CUDA_OR_FAIL(cudaEventElapsedTime(&ms, start, stop));
    if (iteration >= 3) times_ms.push_back(ms);
  }
  std::sort(times_ms.begin(), times_ms.end());
  const double seconds = times_ms[times_ms.size() / 2] * 1e-3;

  // Floor (SPEC section 6): every KV row, query, output, index read or written
  // once; 2 * (D + D_L) flops per (row, head, visible key).
  const double kv_rows = static_cast<double>(p.batch) * (p.prefix + p.q_len);
  const double bytes = kv_rows * kDim * 2 + kv_rows * 4 +
                       static_cast<double>(p.total_q()) * p.heads * (kDim * 2 + kDimLatent * 2 + 4);
  const double visible = static_cast<double>(p.total_q()) * p.prefix + p.visible_tail_keys;
  const double flops = 2.0 * (kDim + kDimLatent) * p.heads * visible;
  const double floor_s = std::max(bytes / kNominalBandwidth, flops / kNominalMma);
  std::printf("kernel time (median of 20): %.4f ms; floor %.4f ms; efficiency %.3f\n",
              seconds * 1e3, floor_s * 1e3, floor_s / seconds);
  std::printf("  (floor assumes nominal H200 figures %.2f TB/s and %.0f TFLOP/s; bench/ measures "
              "the card's own)\n",
              kNominalBandwidth * 1e-12, kNominalMma * 1e-12);

  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  for (void* ptr : {static_cast<void*>(q), static_cast<void*>(kv), static_cast<void*>(out),
                    static_cast<void*>(qo_indptr), static_cast<void*>(kv_indptr),
                    static_cast<void*>(kv_indices), static_cast<void*>(mask),
                    static_cast<void*>(mask_indptr), static_cast<void*>(lse), workspace}) {
    cudaFree(ptr);
  }
  if (!finite || !(relative_error <= kMaxRelativeError)) {
    std::fprintf(stderr, "WRONG RESULT: error %.3e exceeds %.0e or output not finite\n",
                 relative_error, kMaxRelativeError);
    return 1;
  }
  return 0;
}

}  // namespace

int main() {
  std::printf("%s\n", kdtree_build_info());
  int count = 0;
  const cudaError_t counted = cudaGetDeviceCount(&count);
  if (counted != cudaSuccess || count == 0) {
    std::printf("devices: none (%s)\n",
                counted != cudaSuccess ? cudaGetErrorString(counted) : "0 devices");
    return run_without_gpu();
  }
  int first_supported = -1;
  for (int device = 0; device < count; ++device) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) continue;
    int32_t supported = 0;
    const kdtree_status status = kdtree_device_supported(device, &supported);
    std::printf("device %d: %s, sm_%d%d, %d SMs, %.1f GiB, %s\n", device, prop.name, prop.major,
                prop.minor, prop.multiProcessorCount,
                static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0),
                status != KDTREE_OK ? kdtree_last_error_message()
                                    : (supported ? "supported by this build" : "NOT built for this arch"));
    if (status == KDTREE_OK && supported && first_supported < 0) first_supported = device;
  }
  if (first_supported < 0) {
    std::printf("no device this build supports: the GPU path did not run\n");
    return run_without_gpu();
  }
  return run_on_gpu(first_supported);
}
