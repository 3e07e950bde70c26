// defrag_sim: a serving pool that fragments, then defragments step by step.
//
// A page_size-1 KV pool (slot 0 reserved) serves requests of random lengths:
// admissions pop slots from the free list, evictions push them back, so after
// some churn every request's slots are scattered. Then, each step: plan with
// a per-step move budget (kdtree_defrag_plan), copy the rows of every layer
// (kdtree_defrag_copy), remap req_to_token (kdtree_defrag_remap), return the
// old slots (protocol step 4). Fragmentation statistics are printed before
// and after each step, and the time of kdtree_verify_paged over all requests
// (CUDA events) before and after, so the effect of contiguity on the verify
// kernel shows. Without a GPU only the planner part runs, and says so.
//
//   defrag_sim [num_slots] [steps] [budget_per_step]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "kdtree_kernels.h"

namespace {

#define CUDA_OK(call)                                                                     \
  do {                                                                                    \
    cudaError_t e_ = (call);                                                              \
    if (e_ != cudaSuccess) {                                                              \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                  \
                   cudaGetErrorString(e_));                                               \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

#define KD_OK(call)                                                                       \
  do {                                                                                    \
    kdtree_status s_ = (call);                                                            \
    if (s_ != KDTREE_OK) {                                                                \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                  \
                   kdtree_last_error_message());                                          \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

constexpr int kHeads = 16;
constexpr int kDim = 576;        // D = D_L + D_R
constexpr int kDimLatent = 512;  // D_L
constexpr int kQLen = 8;         // draft tokens per request
constexpr int kLayers = 4;       // layers copied per move (verify reads layer 0)
constexpr int kMaxRequests = 64;

// The serving pool on the host: live requests' slot lists and the free list.
struct ServingPool {
  int64_t num_slots;
  std::vector<std::vector<int64_t>> requests;
  std::vector<int64_t> free_slots;  // a stack: admissions pop from the back
  std::vector<int64_t> reserved{0};

  // CSR view for the planner / statistics (rebuilt on demand).
  std::vector<int64_t> indptr, slots;
  kdtree_defrag_plan_params params() {
    indptr.assign(1, 0);
    slots.clear();
    for (const auto& r : requests) {
      slots.insert(slots.end(), r.begin(), r.end());
      indptr.push_back(static_cast<int64_t>(slots.size()));
    }
    kdtree_defrag_plan_params p;
    KD_OK(kdtree_defrag_plan_params_init(&p));
    p.num_slots = num_slots;
    p.num_requests = static_cast<int64_t>(requests.size());
    p.request_indptr = indptr.data();
    p.request_slots = slots.data();
    p.free_slots = free_slots.data();
    p.num_free = static_cast<int64_t>(free_slots.size());
    p.reserved_slots = reserved.data();
    p.num_reserved = 1;
    return p;
  }
};

void churn(ServingPool& pool, std::mt19937_64& rng, int rounds, int max_len) {
  for (int i = 0; i < rounds; ++i) {
    // Evict a random request now and then; admit while there is room.
    if (!pool.requests.empty() && (rng() % 3 == 0 || pool.requests.size() >= kMaxRequests)) {
      const size_t victim = rng() % pool.requests.size();
      auto& r = pool.requests[victim];
      pool.free_slots.insert(pool.free_slots.end(), r.rbegin(), r.rend());
      pool.requests.erase(pool.requests.begin() + victim);
    }
    const size_t len = kQLen + rng() % max_len;
    if (pool.requests.size() < kMaxRequests && len < pool.free_slots.size() / 2) {
      std::vector<int64_t> r;
      for (size_t k = 0; k < len; ++k) {
        // Decode-time allocation order is interleaved with other requests:
        // take from a random spot near the top of the free stack.
        const size_t window = std::min<size_t>(pool.free_slots.size(), 64);
        const size_t at = pool.free_slots.size() - 1 - rng() % window;
        r.push_back(pool.free_slots[at]);
        std::swap(pool.free_slots[at], pool.free_slots.back());
        pool.free_slots.pop_back();
      }
      pool.requests.push_back(std::move(r));
    }
  }
}

void print_stats(const char* when, ServingPool& pool) {
  kdtree_defrag_plan_params p = pool.params();
  kdtree_fragmentation_stats s;
  std::memset(&s, 0, sizeof(s));
  s.struct_size = sizeof(s);
  KD_OK(kdtree_fragmentation_stats_compute(&p, nullptr, &s));
  std::printf("  %-7s requests %3lld  live %8lld  runs %8lld (max %6lld)  mean run %7.2f  "
              "free %8lld  largest free run %8lld\n",
              when, (long long)s.num_requests, (long long)s.total_slots, (long long)s.total_runs,
              (long long)s.max_runs, s.mean_run_length, (long long)s.num_free,
              (long long)s.largest_free_run);
}

struct Moves {
  std::vector<int64_t> src, dst;
};

Moves plan_step(ServingPool& pool, int64_t budget) {
  Moves m;
  m.src.resize(budget);
  m.dst.resize(budget);
  int64_t count = 0;
  kdtree_defrag_plan_params p = pool.params();
  p.budget = budget;
  p.move_src = m.src.data();
  p.move_dst = m.dst.data();
  p.num_moves = &count;
  const auto t0 = std::chrono::steady_clock::now();
  KD_OK(kdtree_defrag_plan(&p));
  const auto t1 = std::chrono::steady_clock::now();
  std::printf("  plan: %lld moves in %.2f ms\n", (long long)count,
              std::chrono::duration<double, std::milli>(t1 - t0).count());
  m.src.resize(count);
  m.dst.resize(count);
  return m;
}

// Protocol step 4 on the host: requests hold destinations, sources are freed.
void apply_moves(ServingPool& pool, const Moves& m) {
  std::vector<int64_t> map(pool.num_slots, -1);
  std::vector<uint8_t> taken(pool.num_slots, 0);
  for (size_t k = 0; k < m.src.size(); ++k) {
    map[m.src[k]] = m.dst[k];
    taken[m.dst[k]] = 1;
  }
  for (auto& r : pool.requests) {
    for (auto& s : r) {
      if (map[s] >= 0) s = map[s];
    }
  }
  std::vector<int64_t> free_slots;
  for (int64_t s : pool.free_slots) {
    if (!taken[s]) free_slots.push_back(s);
  }
  free_slots.insert(free_slots.end(), m.src.begin(), m.src.end());
  pool.free_slots = std::move(free_slots);
}

// ---------------------------------------------------------------------------
// GPU side
// ---------------------------------------------------------------------------

__global__ void fill_bf16_kernel(uint16_t* data, int64_t count, uint64_t seed) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    uint64_t h = (static_cast<uint64_t>(i) + seed) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    const float f = static_cast<float>(h & 0xFFFF) / 32768.0f - 1.0f;  // [-1, 1)
    data[i] = static_cast<uint16_t>(__float_as_uint(f) >> 16);
  }
}

struct Device {
  int64_t num_slots;
  uint16_t* kv = nullptr;           // [kLayers, num_slots, kDim] bf16
  uint64_t* layer_base = nullptr;   // [kLayers]
  int32_t* table = nullptr;         // req_to_token [kMaxRequests, max_len]
  int32_t* kv_indices = nullptr;    // packed indices for verify
  int32_t* qo_indptr = nullptr;
  int32_t* kv_indptr = nullptr;
  uint16_t* q = nullptr;
  uint16_t* out = nullptr;
  void* verify_ws = nullptr;
  size_t verify_ws_bytes = 0;
  int64_t* move_src = nullptr;
  int64_t* move_dst = nullptr;
  void* remap_ws = nullptr;
  size_t remap_ws_bytes = 0;
  int64_t max_len;
  cudaStream_t stream;
};

// Verify over all requests (tail from indices, no mask), indices taken from
// the pool's current slot lists. Returns the mean time of `reps` calls (ms).
double time_verify(Device& d, ServingPool& pool, int reps) {
  const int batch = static_cast<int>(pool.requests.size());
  std::vector<int32_t> qo(batch + 1, 0), kv(batch + 1, 0), indices;
  int64_t max_kv = 0;
  for (int b = 0; b < batch; ++b) {
    const auto& r = pool.requests[b];
    indices.insert(indices.end(), r.begin(), r.end());
    qo[b + 1] = qo[b] + kQLen;
    kv[b + 1] = static_cast<int32_t>(indices.size());
    max_kv = std::max<int64_t>(max_kv, static_cast<int64_t>(r.size()));
  }
  CUDA_OK(cudaMemcpy(d.kv_indices, indices.data(), indices.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d.qo_indptr, qo.data(), qo.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d.kv_indptr, kv.data(), kv.size() * 4, cudaMemcpyHostToDevice));

  kdtree_verify_paged_params v;
  KD_OK(kdtree_verify_paged_params_init(&v));
  v.batch_size = batch;
  v.num_heads = kHeads;
  v.max_q_len = kQLen;
  v.total_q = static_cast<int64_t>(batch) * kQLen;
  v.max_kv_len = max_kv;
  v.num_splits = 0;
  v.sm_scale = 0.0416f;
  v.q = d.q;
  v.q_stride_token = kHeads * kDim;
  v.q_stride_head = kDim;
  v.kv_cache = d.kv;
  v.kv_stride_slot = kDim;
  v.num_slots = d.num_slots;
  v.qo_indptr = d.qo_indptr;
  v.kv_indptr = d.kv_indptr;
  v.kv_indices = d.kv_indices;
  v.out = d.out;
  v.out_stride_token = kHeads * kDimLatent;
  v.out_stride_head = kDimLatent;
  size_t ws = 0;
  KD_OK(kdtree_verify_workspace_size(&v, &ws));
  if (ws > d.verify_ws_bytes) {
    if (d.verify_ws) CUDA_OK(cudaFree(d.verify_ws));
    CUDA_OK(cudaMalloc(&d.verify_ws, ws));
    d.verify_ws_bytes = ws;
  }
  KD_OK(kdtree_verify_paged(&v, d.verify_ws, d.verify_ws_bytes, d.stream));  // warm-up
  cudaEvent_t start, stop;
  CUDA_OK(cudaEventCreate(&start));
  CUDA_OK(cudaEventCreate(&stop));
  CUDA_OK(cudaEventRecord(start, d.stream));
  for (int i = 0; i < reps; ++i) {
    KD_OK(kdtree_verify_paged(&v, d.verify_ws, d.verify_ws_bytes, d.stream));
  }
  CUDA_OK(cudaEventRecord(stop, d.stream));
  CUDA_OK(cudaEventSynchronize(stop));
  float ms = 0;
  CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
  CUDA_OK(cudaEventDestroy(start));
  CUDA_OK(cudaEventDestroy(stop));
  return ms / reps;
}

void upload_table(Device& d, ServingPool& pool) {
  std::vector<int32_t> table(static_cast<size_t>(kMaxRequests) * d.max_len, 0);
  for (size_t b = 0; b < pool.requests.size(); ++b) {
    std::copy(pool.requests[b].begin(), pool.requests[b].end(), table.begin() + b * d.max_len);
  }
  CUDA_OK(cudaMemcpy(d.table, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
}

// Copy + remap of one step's moves on the device (protocol steps 2 and 3).
void run_moves(Device& d, const Moves& m) {
  const int64_t n = static_cast<int64_t>(m.src.size());
  if (n == 0) return;
  CUDA_OK(cudaMemcpy(d.move_src, m.src.data(), n * 8, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d.move_dst, m.dst.data(), n * 8, cudaMemcpyHostToDevice));
  kdtree_defrag_copy_params c;
  KD_OK(kdtree_defrag_copy_params_init(&c));
  c.num_layers = kLayers;
  c.layer_base = d.layer_base;
  c.slot_stride_bytes = kDim * 2;
  c.row_bytes = kDim * 2;
  c.num_slots = d.num_slots;
  c.src_slots = d.move_src;
  c.dst_slots = d.move_dst;
  c.index_dtype = KDTREE_DTYPE_INT64;
  c.max_moves = n;
  KD_OK(kdtree_defrag_copy(&c, d.stream));

  kdtree_defrag_remap_params r;
  KD_OK(kdtree_defrag_remap_params_init(&r));
  r.table_dtype = KDTREE_DTYPE_INT32;
  r.table = d.table;
  r.rows = kMaxRequests;
  r.cols = d.max_len;
  r.row_stride = d.max_len;
  r.num_slots = d.num_slots;
  r.src_slots = d.move_src;
  r.dst_slots = d.move_dst;
  r.index_dtype = KDTREE_DTYPE_INT64;
  r.max_moves = n;
  KD_OK(kdtree_defrag_remap(&r, d.remap_ws, d.remap_ws_bytes, d.stream));
  CUDA_OK(cudaStreamSynchronize(d.stream));
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t num_slots = argc > 1 ? std::atoll(argv[1]) : int64_t{1} << 19;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 5;
  const int64_t budget = argc > 3 ? std::atoll(argv[3]) : 16384;
  const int max_len = static_cast<int>(std::min<int64_t>(8192, num_slots / (2 * kMaxRequests)));
  std::mt19937_64 rng(7);

  ServingPool pool;
  pool.num_slots = num_slots;
  for (int64_t s = num_slots - 1; s >= 1; --s) pool.free_slots.push_back(s);
  churn(pool, rng, 600, max_len);
  std::printf("defrag_sim: %lld slots, %zu requests after churn, budget %lld moves per step\n",
              (long long)num_slots, pool.requests.size(), (long long)budget);

  int devices = 0;
  const bool gpu = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  if (!gpu) std::printf("no CUDA device: running the planner only (no copy, remap or verify)\n");

  Device d;
  if (gpu) {
    d.num_slots = num_slots;
    d.max_len = 0;
    for (const auto& r : pool.requests) d.max_len = std::max<int64_t>(d.max_len, r.size());
    CUDA_OK(cudaStreamCreate(&d.stream));
    const int64_t layer_elems = num_slots * kDim;
    CUDA_OK(cudaMalloc(&d.kv, kLayers * layer_elems * 2));
    fill_bf16_kernel<<<1024, 256, 0, d.stream>>>(d.kv, kLayers * layer_elems, 1);
    std::vector<uint64_t> bases(kLayers);
    for (int l = 0; l < kLayers; ++l) bases[l] = reinterpret_cast<uint64_t>(d.kv + l * layer_elems);
    CUDA_OK(cudaMalloc(&d.layer_base, kLayers * 8));
    CUDA_OK(cudaMemcpy(d.layer_base, bases.data(), kLayers * 8, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMalloc(&d.table, static_cast<size_t>(kMaxRequests) * d.max_len * 4));
    CUDA_OK(cudaMalloc(&d.kv_indices, num_slots * 4));
    CUDA_OK(cudaMalloc(&d.qo_indptr, (kMaxRequests + 1) * 4));
    CUDA_OK(cudaMalloc(&d.kv_indptr, (kMaxRequests + 1) * 4));
    CUDA_OK(cudaMalloc(&d.q, static_cast<size_t>(kMaxRequests) * kQLen * kHeads * kDim * 2));
    fill_bf16_kernel<<<256, 256, 0, d.stream>>>(d.q, int64_t{kMaxRequests} * kQLen * kHeads * kDim, 2);
    CUDA_OK(cudaMalloc(&d.out, static_cast<size_t>(kMaxRequests) * kQLen * kHeads * kDimLatent * 2));
    CUDA_OK(cudaMalloc(&d.move_src, budget * 8));
    CUDA_OK(cudaMalloc(&d.move_dst, budget * 8));
    kdtree_defrag_remap_params r;
    KD_OK(kdtree_defrag_remap_params_init(&r));
    r.num_slots = num_slots;
    KD_OK(kdtree_defrag_remap_workspace_size(&r, &d.remap_ws_bytes));
    CUDA_OK(cudaMalloc(&d.remap_ws, d.remap_ws_bytes));
    upload_table(d, pool);
    CUDA_OK(cudaStreamSynchronize(d.stream));
  }

  for (int step = 0; step < steps; ++step) {
    std::printf("step %d\n", step);
    print_stats("before", pool);
    const double verify_before = gpu ? time_verify(d, pool, 20) : 0.0;
    const Moves m = plan_step(pool, budget);
    if (gpu) run_moves(d, m);
    apply_moves(pool, m);
    print_stats("after", pool);
    if (gpu) {
      const double verify_after = time_verify(d, pool, 20);
      std::printf("  verify over %zu requests: %.3f ms before, %.3f ms after\n", pool.requests.size(),
                  verify_before, verify_after);
    }
    if (m.src.empty()) {
      std::printf("nothing left to move\n");
      break;
    }
  }
  if (gpu) {
    // The device table must equal the host slot lists after all steps.
    std::vector<int32_t> table(static_cast<size_t>(kMaxRequests) * d.max_len);
    CUDA_OK(cudaMemcpy(table.data(), d.table, table.size() * 4, cudaMemcpyDeviceToHost));
    size_t mismatches = 0;
    for (size_t b = 0; b < pool.requests.size(); ++b) {
      for (size_t c = 0; c < pool.requests[b].size(); ++c) {
        mismatches += table[b * d.max_len + c] != pool.requests[b][c];
      }
    }
    std::printf("device req_to_token %s the host slot lists\n", mismatches ? "DIFFERS FROM" : "matches");
    if (mismatches) return 1;
  }
  return 0;
}
