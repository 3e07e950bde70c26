// The defragmentation kernels and the protocol of include/kdtree_kernels.h
// (plan -> copy -> remap + host references -> free old slots) on the GPU.
//
//  - copy: random plans over 61 layers (several row sizes and alignments,
//    int32/int64 indices, device move counts, out-of-range moves): every
//    byte of every layer, guard bands included, equals the host model.
//  - remap: exactly the moved entries below each row's length change
//    (int32/int64 tables and indices, row_lengths, values outside the pool).
//  - protocol: stopped after copy, or after remapping half the rows, every
//    request's KV is identical through its table; re-running completes the
//    plan; after the old slots are poisoned the KV is still identical.
//  - verify: kdtree_verify_paged over a request gives bitwise the same output
//    before and after its relocation (same num_splits).
//  - capture: copy + remap captured once (global mode), replayed with two
//    different plans written into the same buffers.
//  - sort: kdtree_sort_slots against std::sort, counts 0, 1, 2, ... 200k; and
//    captured in a graph, replayed over two fills.
// Under a sanitizer (light mode): copy pools of half the slots with plans of
// at most 200 moves (600), a capture pool of 1000 slots (4000) with plans of
// 200 and 750 moves (700 and 3000), sort counts up to 20k (200k), a captured
// sort of 5k slots (50k); every copy case, index dtype, remap and protocol
// case still runs.
// Exits 77 (skipped) without a GPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "common/gpu_test.hpp"
#include "kdtree_kernels.h"
#include "reference/host_dtype.hpp"

namespace {

int g_failures = 0;

#define CHECK(cond)                                                                       \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);       \
      ++g_failures;                                                                       \
    }                                                                                     \
  } while (0)

template <class T>
T* device_copy(const std::vector<T>& host) {
  T* d = nullptr;
  CUDA_CHECK(cudaMalloc(&d, std::max<size_t>(1, host.size()) * sizeof(T)));
  kdtest::upload(d, host.data(), host.size() * sizeof(T));
  return d;
}

template <class T>
std::vector<T> host_copy(const T* d, size_t n) {
  std::vector<T> h(n);
  if (n) CUDA_CHECK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

// Indices of either width, stored as int64 on the host.
void* device_indices(const std::vector<int64_t>& v, int32_t dtype) {
  if (dtype == KDTREE_DTYPE_INT64) return device_copy(v);
  std::vector<int32_t> narrow(v.begin(), v.end());
  return device_copy(narrow);
}

// The `count` INT32 / INT64 indices at d, widened.
std::vector<int64_t> host_indices(const void* d, int32_t dtype, int64_t count) {
  if (dtype == KDTREE_DTYPE_INT64) return host_copy(static_cast<const int64_t*>(d), count);
  const std::vector<int32_t> narrow = host_copy(static_cast<const int32_t*>(d), count);
  return std::vector<int64_t>(narrow.begin(), narrow.end());
}

// A page_size-1 pool: requests of random lengths on shuffled slots of
// [1, num_slots - free_tail), the rest and the tail free; slot 0 reserved
// (neither live nor free, like SGLang's padding slot). The contiguous free
// tail gives the planner windows for long requests.
struct Pool {
  int64_t num_slots = 0;
  std::vector<int64_t> indptr{0};
  std::vector<int64_t> slots;
  std::vector<int64_t> free_slots;
  std::vector<int64_t> reserved{0};
};

Pool random_pool(std::mt19937_64& rng, int64_t num_slots, int num_requests, int max_len,
                 int64_t free_tail) {
  Pool pool;
  pool.num_slots = num_slots;
  std::vector<int64_t> order(num_slots - free_tail - 1);
  std::iota(order.begin(), order.end(), 1);
  std::shuffle(order.begin(), order.end(), rng);
  size_t next = 0;
  for (int b = 0; b < num_requests; ++b) {
    const size_t len = std::min<size_t>(1 + rng() % max_len, order.size() / 2 - next / 2);
    // Half the requests get contiguous pieces so windows can extend runs.
    const bool pieces = rng() % 2 == 0;
    for (size_t i = 0; i < len && next < order.size(); ++i) {
      pool.slots.push_back(order[next++]);
      if (pieces && i + 1 < len && pool.slots.back() + 1 < num_slots && rng() % 3 != 0) {
        // take the next slot if it is still unassigned (swap it forward)
        const int64_t want = pool.slots.back() + 1;
        auto it = std::find(order.begin() + next, order.end(), want);
        if (it != order.end()) {
          std::iter_swap(order.begin() + next, it);
          pool.slots.push_back(order[next++]);
          ++i;
        }
      }
    }
    pool.indptr.push_back(static_cast<int64_t>(pool.slots.size()));
  }
  pool.free_slots.assign(order.begin() + next, order.end());
  for (int64_t s = num_slots - free_tail; s < num_slots; ++s) pool.free_slots.push_back(s);
  std::shuffle(pool.free_slots.begin(), pool.free_slots.end(), rng);
  return pool;
}

// Step 4 of the protocol on the host model: requests hold the destinations,
// sources go back to the free list, destinations leave it.
void apply_plan(Pool& pool, const std::vector<int64_t>& src, const std::vector<int64_t>& dst) {
  std::vector<int64_t> map(pool.num_slots, -1);
  std::vector<uint8_t> taken(pool.num_slots, 0);
  for (size_t m = 0; m < src.size(); ++m) {
    map[src[m]] = dst[m];
    taken[dst[m]] = 1;
  }
  for (auto& s : pool.slots) {
    if (map[s] >= 0) s = map[s];
  }
  std::vector<int64_t> free_slots;
  for (int64_t s : pool.free_slots) {
    if (!taken[s]) free_slots.push_back(s);
  }
  free_slots.insert(free_slots.end(), src.begin(), src.end());
  pool.free_slots = free_slots;
}

struct Plan {
  std::vector<int64_t> src, dst;
};

Plan plan_pool(const Pool& pool, int64_t budget) {
  Plan plan;
  plan.src.assign(std::max<int64_t>(budget, 1), -1);
  plan.dst.assign(std::max<int64_t>(budget, 1), -1);
  int64_t count = 0;
  kdtree_defrag_plan_params p;
  KDTREE_CHECK(kdtree_defrag_plan_params_init(&p));
  p.num_slots = pool.num_slots;
  p.num_requests = static_cast<int64_t>(pool.indptr.size()) - 1;
  p.request_indptr = pool.indptr.data();
  p.request_slots = pool.slots.data();
  p.free_slots = pool.free_slots.data();
  p.num_free = static_cast<int64_t>(pool.free_slots.size());
  p.reserved_slots = pool.reserved.data();
  p.num_reserved = static_cast<int64_t>(pool.reserved.size());
  p.budget = budget;
  p.move_src = plan.src.data();
  p.move_dst = plan.dst.data();
  p.num_moves = &count;
  KDTREE_CHECK(kdtree_defrag_plan(&p));
  plan.src.resize(count);
  plan.dst.resize(count);
  return plan;
}

// Layers of one allocation with guard bands; layer l starts at `skew[l]`
// bytes past a 256-aligned offset so alignment can differ per layer.
struct Layers {
  int num_layers;
  int64_t num_slots, stride, layer_bytes, span;
  std::vector<int64_t> skew;
  uint8_t* base = nullptr;
  uint64_t* layer_base = nullptr;  // device array
  std::vector<uint8_t> host;       // the model of the whole allocation
};

constexpr int64_t kGuard = 256;

Layers make_layers(std::mt19937_64& rng, int num_layers, int64_t num_slots, int64_t stride,
                   bool skewed) {
  Layers L;
  L.num_layers = num_layers;
  L.num_slots = num_slots;
  L.stride = stride;
  L.layer_bytes = num_slots * stride;
  L.span = (L.layer_bytes + 2 * kGuard + 255) / 256 * 256;
  L.host.resize(static_cast<size_t>(L.span) * num_layers + kGuard);
  for (auto& b : L.host) b = static_cast<uint8_t>(rng());
  CUDA_CHECK(cudaMalloc(&L.base, L.host.size()));
  kdtest::upload(L.base, L.host.data(), L.host.size());
  std::vector<uint64_t> bases(num_layers);
  for (int l = 0; l < num_layers; ++l) {
    L.skew.push_back(skewed ? (l % 4) * 4 : 0);
    bases[l] = reinterpret_cast<uint64_t>(L.base) + l * L.span + kGuard + L.skew[l];
  }
  L.layer_base = device_copy(bases);
  return L;
}

void free_layers(Layers& L) {
  CUDA_CHECK(cudaFree(L.base));
  CUDA_CHECK(cudaFree(L.layer_base));
}

uint8_t* host_row(Layers& L, int layer, int64_t slot) {
  return L.host.data() + layer * L.span + kGuard + L.skew[layer] + slot * L.stride;
}

void model_copy(Layers& L, const Plan& plan, int64_t count, int64_t row_bytes) {
  for (int l = 0; l < L.num_layers; ++l) {
    for (int64_t m = 0; m < count; ++m) {
      const int64_t s = plan.src[m], d = plan.dst[m];
      if (s < 0 || s >= L.num_slots || d < 0 || d >= L.num_slots) continue;
      std::memcpy(host_row(L, l, d), host_row(L, l, s), row_bytes);
    }
  }
}

uint64_t fnv1a(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// ------------------------------------------------------------------------
// copy
// ------------------------------------------------------------------------

void test_copy(std::mt19937_64& rng) {
  // The kernel copies up to 3 layers of a move together when a warp takes a
  // row (>= 512 B) and every address is 16-byte aligned: layer counts 61,
  // 62 and 1 end moves on tasks of 1, 2 and 1 rows; 2064-byte rows take two
  // chunks of 96 units, the second partial; skewed layers and 1000-byte rows
  // take the row-at-a-time path with a full warp.
  struct Case {
    int64_t row_bytes, stride;
    int32_t dtype;
    bool skewed, device_count;
    int num_layers;
  };
  const Case cases[] = {
      {64, 64, KDTREE_DTYPE_INT32, false, false, 61},
      {1152, 1152, KDTREE_DTYPE_INT64, false, true, 61},
      {1152, 1280, KDTREE_DTYPE_INT32, true, true, 61},
      {1152, 1152, KDTREE_DTYPE_INT32, false, false, 1},
      {2064, 2080, KDTREE_DTYPE_INT64, false, true, 62},
      {1000, 1008, KDTREE_DTYPE_INT32, false, false, 61},
      {48, 64, KDTREE_DTYPE_INT64, false, false, 61},
      {40, 48, KDTREE_DTYPE_INT32, false, true, 61},
      {37, 41, KDTREE_DTYPE_INT64, true, false, 61},
      {16, 16, KDTREE_DTYPE_INT32, true, false, 61},
  };
  for (const Case& c : cases) {
    const int64_t full_slots = c.row_bytes >= 2048 ? 1024 : c.row_bytes >= 1000 ? 2048 : 4096;
    const int64_t num_slots = kdtest::scaled(full_slots, full_slots / 2);
    Layers L = make_layers(rng, c.num_layers, num_slots, c.stride, c.skewed);
    Pool pool = random_pool(rng, num_slots, 40, 80, num_slots / 4);
    Plan plan = plan_pool(pool, kdtest::scaled<int64_t>(600, 200));
    const int64_t planned = static_cast<int64_t>(plan.src.size());
    CHECK(planned > 0);
    // Two out-of-range moves, flagged and skipped.
    plan.src.push_back(-3);
    plan.dst.push_back(pool.free_slots[0]);
    plan.src.push_back(pool.slots[0]);
    plan.dst.push_back(num_slots);
    int64_t count = planned + 2;
    // With a device count, moves past it are valid-looking but must not run.
    Plan padded = plan;
    if (c.device_count) {
      for (int k = 0; k < 5; ++k) {
        padded.src.push_back(pool.free_slots[1]);
        padded.dst.push_back(pool.slots[1]);
      }
    }
    void* d_src = device_indices(padded.src, c.dtype);
    void* d_dst = device_indices(padded.dst, c.dtype);
    int64_t* d_count = device_copy(std::vector<int64_t>{count});
    int32_t* d_flag = device_copy(std::vector<int32_t>{0});

    kdtree_defrag_copy_params p;
    KDTREE_CHECK(kdtree_defrag_copy_params_init(&p));
    p.num_layers = L.num_layers;
    p.layer_base = L.layer_base;
    p.slot_stride_bytes = c.stride;
    p.row_bytes = c.row_bytes;
    p.num_slots = num_slots;
    p.src_slots = d_src;
    p.dst_slots = d_dst;
    p.index_dtype = c.dtype;
    p.max_moves = static_cast<int64_t>(padded.src.size());
    p.num_moves = c.device_count ? d_count : nullptr;
    p.error_flag = d_flag;
    KDTREE_CHECK(kdtree_defrag_copy(&p, nullptr));
    CUDA_CHECK(cudaDeviceSynchronize());

    model_copy(L, plan, count, c.row_bytes);
    const std::vector<uint8_t> got = host_copy(L.base, L.host.size());
    CHECK(got == L.host);
    CHECK(host_copy(d_flag, 1)[0] == KDTREE_FLAG_SLOT_OUT_OF_RANGE);
    std::printf("  copy: row %lld B stride %lld %s%s%s: %lld moves x %d layers, checksum %016llx %s\n",
                (long long)c.row_bytes, (long long)c.stride,
                c.dtype == KDTREE_DTYPE_INT64 ? "int64" : "int32", c.skewed ? " skewed" : "",
                c.device_count ? " device-count" : "", (long long)planned, c.num_layers,
                (unsigned long long)fnv1a(got.data(), got.size()), got == L.host ? "ok" : "MISMATCH");
    CUDA_CHECK(cudaFree(d_src));
    CUDA_CHECK(cudaFree(d_dst));
    CUDA_CHECK(cudaFree(d_count));
    CUDA_CHECK(cudaFree(d_flag));
    free_layers(L);
  }
}

// ------------------------------------------------------------------------
// remap
// ------------------------------------------------------------------------

// The remap workspace remap_rows() shares between calls. It was a
// function-local static never freed: the one leak compute-sanitizer's
// --leak-check full reported for this test.
void* g_remap_workspace = nullptr;
size_t g_remap_workspace_bytes = 0;

// Runs kdtree_defrag_remap on rows [row_begin, row_end) of a device table.
void remap_rows(void* d_table, int32_t table_dtype, int64_t row_begin, int64_t row_end,
                int64_t cols, int64_t row_stride, const int32_t* d_lengths, int64_t num_slots,
                const void* d_src, const void* d_dst, int32_t index_dtype, int64_t max_moves,
                const int64_t* d_count, int32_t* d_flag, cudaStream_t stream) {
  kdtree_defrag_remap_params r;
  KDTREE_CHECK(kdtree_defrag_remap_params_init(&r));
  const size_t elem = table_dtype == KDTREE_DTYPE_INT64 ? 8 : 4;
  r.table_dtype = table_dtype;
  r.table = static_cast<char*>(d_table) + row_begin * row_stride * elem;
  r.rows = row_end - row_begin;
  r.cols = cols;
  r.row_stride = row_stride;
  r.row_lengths = d_lengths ? d_lengths + row_begin : nullptr;
  r.num_slots = num_slots;
  r.src_slots = d_src;
  r.dst_slots = d_dst;
  r.index_dtype = index_dtype;
  r.max_moves = max_moves;
  r.num_moves = d_count;
  r.error_flag = d_flag;
  size_t bytes = 0;
  KDTREE_CHECK(kdtree_defrag_remap_workspace_size(&r, &bytes));
  // One workspace, grown on demand and kept across calls like an engine's
  // (and so across graph capture); main() frees it.
  if (bytes > g_remap_workspace_bytes) {
    if (g_remap_workspace) CUDA_CHECK(cudaFree(g_remap_workspace));
    CUDA_CHECK(cudaMalloc(&g_remap_workspace, bytes));
    g_remap_workspace_bytes = bytes;
  }
  KDTREE_CHECK(kdtree_defrag_remap(&r, g_remap_workspace, g_remap_workspace_bytes, stream));
}

void free_remap_workspace() {
  if (g_remap_workspace) CUDA_CHECK(cudaFree(g_remap_workspace));
  g_remap_workspace = nullptr;
  g_remap_workspace_bytes = 0;
}

void test_remap(std::mt19937_64& rng) {
  for (int32_t table_dtype : {KDTREE_DTYPE_INT32, KDTREE_DTYPE_INT64}) {
    for (int32_t index_dtype : {KDTREE_DTYPE_INT32, KDTREE_DTYPE_INT64}) {
      for (bool with_lengths : {false, true}) {
        const int64_t num_slots = 5000, rows = 37, cols = 300, stride = 311;
        Pool pool = random_pool(rng, num_slots, 30, 200, num_slots / 4);
        Plan plan = plan_pool(pool, 2000);
        plan.src.push_back(num_slots + 7);  // flagged, skipped
        plan.dst.push_back(pool.free_slots[0]);
        std::vector<int64_t> map(num_slots, -1);
        for (size_t m = 0; m + 1 < plan.src.size(); ++m) map[plan.src[m]] = plan.dst[m];

        std::vector<int64_t> table(rows * stride);
        std::vector<int32_t> lengths(rows);
        for (auto& v : table) {
          const int64_t roll = rng() % 20;
          v = roll == 0 ? -1 : roll == 1 ? num_slots + (int64_t)(rng() % 9)
              : roll < 8 && plan.src.size() > 1 ? plan.src[rng() % (plan.src.size() - 1)]
                                               : (int64_t)(rng() % num_slots);
        }
        for (auto& n : lengths) n = static_cast<int32_t>(rng() % (cols + 20)) - 10;
        std::vector<int64_t> expected = table;
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t len = with_lengths ? std::min<int64_t>(cols, std::max(0, lengths[r])) : cols;
          for (int64_t c = 0; c < len; ++c) {
            int64_t& v = expected[r * stride + c];
            if (v >= 0 && v < num_slots && map[v] >= 0) v = map[v];
          }
        }
        void* d_table = device_indices(table, table_dtype);
        int32_t* d_lengths = device_copy(lengths);
        void* d_src = device_indices(plan.src, index_dtype);
        void* d_dst = device_indices(plan.dst, index_dtype);
        int32_t* d_flag = device_copy(std::vector<int32_t>{0});
        remap_rows(d_table, table_dtype, 0, rows, cols, stride, with_lengths ? d_lengths : nullptr,
                   num_slots, d_src, d_dst, index_dtype, static_cast<int64_t>(plan.src.size()),
                   nullptr, d_flag, nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<int64_t> got;
        if (table_dtype == KDTREE_DTYPE_INT64) {
          got = host_copy(static_cast<int64_t*>(d_table), table.size());
        } else {
          auto narrow = host_copy(static_cast<int32_t*>(d_table), table.size());
          got.assign(narrow.begin(), narrow.end());
        }
        CHECK(got == expected);
        CHECK(host_copy(d_flag, 1)[0] == KDTREE_FLAG_SLOT_OUT_OF_RANGE);
        CUDA_CHECK(cudaFree(d_table));
        CUDA_CHECK(cudaFree(d_lengths));
        CUDA_CHECK(cudaFree(d_src));
        CUDA_CHECK(cudaFree(d_dst));
        CUDA_CHECK(cudaFree(d_flag));
      }
    }
  }
  std::printf("  remap: int32/int64 tables x indices x row_lengths ok\n");

  // Out-of-range moves are flagged with nothing to rewrite too: an empty table
  // (no map, no workspace) and an empty pool (every move out of range; the
  // table is left as it is).
  const std::vector<int64_t> src = {3, 9}, dst = {5, 12};
  const std::vector<int64_t> table = {3, 9, 3, 9};
  void* d_src = device_indices(src, KDTREE_DTYPE_INT64);
  void* d_dst = device_indices(dst, KDTREE_DTYPE_INT64);
  void* d_table = device_indices(table, KDTREE_DTYPE_INT64);
  int32_t* d_flag = device_copy(std::vector<int32_t>{0});
  struct Empty { int64_t rows, num_slots; int32_t expected_flag; };
  for (const Empty& e : {Empty{0, 10, KDTREE_FLAG_SLOT_OUT_OF_RANGE}, Empty{0, 16, 0},
                         Empty{2, 0, KDTREE_FLAG_SLOT_OUT_OF_RANGE}}) {
    CUDA_CHECK(cudaMemset(d_flag, 0, sizeof(int32_t)));
    kdtree_defrag_remap_params r;
    KDTREE_CHECK(kdtree_defrag_remap_params_init(&r));
    r.table_dtype = KDTREE_DTYPE_INT64;
    r.table = e.rows > 0 ? d_table : nullptr;
    r.rows = e.rows;
    r.cols = 2;
    r.row_stride = 2;
    r.num_slots = e.num_slots;
    r.src_slots = d_src;
    r.dst_slots = d_dst;
    r.index_dtype = KDTREE_DTYPE_INT64;
    r.max_moves = 2;
    r.error_flag = d_flag;
    size_t bytes = 1;
    KDTREE_CHECK(kdtree_defrag_remap_workspace_size(&r, &bytes));
    CHECK(bytes == 0);
    KDTREE_CHECK(kdtree_defrag_remap(&r, nullptr, 0, nullptr));
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK(host_copy(d_flag, 1)[0] == e.expected_flag);
    CHECK(host_copy(static_cast<int64_t*>(d_table), table.size()) == table);
  }
  CUDA_CHECK(cudaFree(d_src));
  CUDA_CHECK(cudaFree(d_dst));
  CUDA_CHECK(cudaFree(d_table));
  CUDA_CHECK(cudaFree(d_flag));
  std::printf("  remap: out-of-range moves flagged with an empty table or pool ok\n");
}

// ------------------------------------------------------------------------
// protocol: interruption after each step, re-run, poisoned old slots
// ------------------------------------------------------------------------

// req_to_token of a pool: [requests, cols] int32, row lengths.
struct Table {
  int64_t rows, cols;
  std::vector<int32_t> host, lengths;
  int32_t* d = nullptr;
  int32_t* d_lengths = nullptr;
};

Table make_table(const Pool& pool) {
  Table t;
  t.rows = static_cast<int64_t>(pool.indptr.size()) - 1;
  t.cols = 0;
  for (int64_t b = 0; b < t.rows; ++b) t.cols = std::max(t.cols, pool.indptr[b + 1] - pool.indptr[b]);
  t.host.assign(t.rows * t.cols, 0);
  for (int64_t b = 0; b < t.rows; ++b) {
    t.lengths.push_back(static_cast<int32_t>(pool.indptr[b + 1] - pool.indptr[b]));
    for (int64_t i = pool.indptr[b]; i < pool.indptr[b + 1]; ++i) {
      t.host[b * t.cols + (i - pool.indptr[b])] = static_cast<int32_t>(pool.slots[i]);
    }
  }
  t.d = device_copy(t.host);
  t.d_lengths = device_copy(t.lengths);
  return t;
}

// Every token of every request, read through the device table from the
// device layers, equals `reference` (the rows of the original pool).
bool reachable_and_identical(const Table& t, const Layers& L, int64_t row_bytes,
                             const std::vector<std::vector<uint8_t>>& reference) {
  const std::vector<int32_t> table = host_copy(t.d, t.host.size());
  const std::vector<uint8_t> layers = host_copy(L.base, L.host.size());
  size_t k = 0;
  for (int64_t b = 0; b < t.rows; ++b) {
    for (int64_t c = 0; c < t.lengths[b]; ++c) {
      const int64_t slot = table[b * t.cols + c];
      for (int l = 0; l < L.num_layers; ++l, ++k) {
        const uint8_t* row = layers.data() + l * L.span + kGuard + L.skew[l] + slot * L.stride;
        if (std::memcmp(row, reference[k].data(), row_bytes) != 0) return false;
      }
    }
  }
  return true;
}

std::vector<std::vector<uint8_t>> snapshot(const Table& t, Layers& L, int64_t row_bytes) {
  std::vector<std::vector<uint8_t>> rows;
  for (int64_t b = 0; b < t.rows; ++b) {
    for (int64_t c = 0; c < t.lengths[b]; ++c) {
      for (int l = 0; l < L.num_layers; ++l) {
        const uint8_t* row = host_row(L, l, t.host[b * t.cols + c]);
        rows.emplace_back(row, row + row_bytes);
      }
    }
  }
  return rows;
}

void run_copy(const Layers& L, int64_t row_bytes, const void* d_src, const void* d_dst,
              int64_t max_moves, const int64_t* d_count, cudaStream_t stream) {
  kdtree_defrag_copy_params p;
  KDTREE_CHECK(kdtree_defrag_copy_params_init(&p));
  p.num_layers = L.num_layers;
  p.layer_base = L.layer_base;
  p.slot_stride_bytes = L.stride;
  p.row_bytes = row_bytes;
  p.num_slots = L.num_slots;
  p.src_slots = d_src;
  p.dst_slots = d_dst;
  p.index_dtype = KDTREE_DTYPE_INT32;
  p.max_moves = max_moves;
  p.num_moves = d_count;
  KDTREE_CHECK(kdtree_defrag_copy(&p, stream));
}

void poison_slots(Layers& L, const std::vector<int64_t>& slots) {
  for (int l = 0; l < L.num_layers; ++l) {
    for (int64_t s : slots) {
      const uint64_t offset = l * L.span + kGuard + L.skew[l] + s * L.stride;
      CUDA_CHECK(cudaMemset(L.base + offset, 0xFF, L.stride));
    }
  }
}

void test_protocol(std::mt19937_64& rng) {
  const int64_t num_slots = 3000, row_bytes = 64;
  for (int interrupt = 0; interrupt < 2; ++interrupt) {
    Layers L = make_layers(rng, 61, num_slots, row_bytes, false);
    Pool pool = random_pool(rng, num_slots, 24, 60, num_slots / 4);
    Table t = make_table(pool);
    const auto reference = snapshot(t, L, row_bytes);
    Plan plan = plan_pool(pool, 1 << 20);
    const int64_t n = static_cast<int64_t>(plan.src.size());
    CHECK(n > 0);
    void* d_src = device_indices(plan.src, KDTREE_DTYPE_INT32);
    void* d_dst = device_indices(plan.dst, KDTREE_DTYPE_INT32);
    CHECK(reachable_and_identical(t, L, row_bytes, reference));

    run_copy(L, row_bytes, d_src, d_dst, n, nullptr, nullptr);  // step 2
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK(reachable_and_identical(t, L, row_bytes, reference));  // stopped after copy
    if (interrupt == 1) {
      // Stopped half way through the remap (the first half of the rows).
      remap_rows(t.d, KDTREE_DTYPE_INT32, 0, t.rows / 2, t.cols, t.cols, t.d_lengths, num_slots,
                 d_src, d_dst, KDTREE_DTYPE_INT32, n, nullptr, nullptr, nullptr);
      CUDA_CHECK(cudaDeviceSynchronize());
      CHECK(reachable_and_identical(t, L, row_bytes, reference));
    }
    // Re-running the whole plan completes it: copy and remap are idempotent.
    run_copy(L, row_bytes, d_src, d_dst, n, nullptr, nullptr);
    remap_rows(t.d, KDTREE_DTYPE_INT32, 0, t.rows, t.cols, t.cols, t.d_lengths, num_slots, d_src,
               d_dst, KDTREE_DTYPE_INT32, n, nullptr, nullptr, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK(reachable_and_identical(t, L, row_bytes, reference));

    // Step 4: the old slots go back to the free list; poison them.
    poison_slots(L, plan.src);
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK(reachable_and_identical(t, L, row_bytes, reference));
    // The device table equals the host model of the applied plan, and
    // re-planning the applied state converges to zero moves.
    apply_plan(pool, plan.src, plan.dst);
    const std::vector<int32_t> table = host_copy(t.d, t.host.size());
    for (int64_t b = 0; b < t.rows; ++b) {
      for (int64_t c = 0; c < t.lengths[b]; ++c) {
        CHECK(table[b * t.cols + c] == pool.slots[pool.indptr[b] + c]);
      }
    }
    int rounds = 0;
    for (Plan next = plan_pool(pool, 1 << 20); !next.src.empty(); next = plan_pool(pool, 1 << 20)) {
      apply_plan(pool, next.src, next.dst);
      if (++rounds > t.rows) break;
    }
    CHECK(rounds <= t.rows);
    std::printf("  protocol (%s): %lld moves, KV identical through the table at every step\n",
                interrupt ? "remap interrupted half way" : "stopped after copy", (long long)n);
    CUDA_CHECK(cudaFree(d_src));
    CUDA_CHECK(cudaFree(d_dst));
    CUDA_CHECK(cudaFree(t.d));
    CUDA_CHECK(cudaFree(t.d_lengths));
    free_layers(L);
  }
}

// ------------------------------------------------------------------------
// verify attention before and after a relocation
// ------------------------------------------------------------------------

void test_verify_after_relocation(std::mt19937_64& rng) {
  const int H = 16, D = 576, DL = 512, q_len = 8;
  const int64_t num_slots = 4096, row_bytes = D * 2;
  Layers L = make_layers(rng, 1, num_slots, row_bytes, false);
  // Rows as bf16 in [-1, 1) instead of random bytes (no NaN/Inf).
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  for (int64_t s = 0; s < num_slots; ++s) {
    uint16_t* row = reinterpret_cast<uint16_t*>(host_row(L, 0, s));
    for (int d = 0; d < D; ++d) row[d] = kdtree::host_dtype::float_to_bf16(uni(rng));
  }
  kdtest::upload(L.base, L.host.data(), L.host.size());
  uint64_t kv_base = 0;
  CUDA_CHECK(cudaMemcpy(&kv_base, L.layer_base, 8, cudaMemcpyDeviceToHost));

  Pool pool = random_pool(rng, num_slots, 3, 700, 1024);
  Table t = make_table(pool);
  // The planner (host) runs first only to pick the request it relocates most:
  // which one that is depends on the random pool.
  Plan plan = plan_pool(pool, 1 << 20);
  const std::set<int64_t> moved(plan.src.begin(), plan.src.end());
  int64_t b = 0, most_moved = -1;
  for (int64_t r = 0; r + 1 < static_cast<int64_t>(pool.indptr.size()); ++r) {
    int64_t n = 0;
    for (int64_t k = pool.indptr[r]; k < pool.indptr[r + 1]; ++k) n += moved.count(pool.slots[k]);
    if (n > most_moved && pool.indptr[r + 1] - pool.indptr[r] >= q_len) b = r, most_moved = n;
  }
  const int kv_len = t.lengths[b];
  CHECK(kv_len >= q_len);

  std::vector<uint16_t> q(q_len * H * D);
  for (auto& x : q) x = kdtree::host_dtype::float_to_bf16(uni(rng));
  uint16_t* d_q = device_copy(q);
  int32_t* d_qo = device_copy(std::vector<int32_t>{0, q_len});
  int32_t* d_kv = device_copy(std::vector<int32_t>{0, kv_len});
  uint16_t* d_out = nullptr;
  CUDA_CHECK(cudaMalloc(&d_out, q_len * H * DL * 2));

  kdtree_verify_paged_params v;
  KDTREE_CHECK(kdtree_verify_paged_params_init(&v));
  v.batch_size = 1;
  v.num_heads = H;
  v.max_q_len = q_len;
  v.total_q = q_len;
  v.max_kv_len = kv_len;
  v.num_splits = 2;
  v.sm_scale = 0.0416f;
  v.q = d_q;
  v.q_stride_token = H * D;
  v.q_stride_head = D;
  v.kv_cache = reinterpret_cast<const void*>(kv_base);
  v.kv_stride_slot = D;
  v.num_slots = num_slots;
  v.qo_indptr = d_qo;
  v.kv_indptr = d_kv;
  v.kv_indices = t.d + b * t.cols;  // row b of the table is request b's kv_indices
  v.index_dtype = KDTREE_DTYPE_INT32;
  v.tail_source = KDTREE_TAIL_FROM_INDICES;
  v.mask_kind = KDTREE_MASK_NONE;
  v.out = d_out;
  v.out_stride_token = H * DL;
  v.out_stride_head = DL;
  size_t ws_bytes = 0;
  KDTREE_CHECK(kdtree_verify_workspace_size(&v, &ws_bytes));
  void* ws = nullptr;
  CUDA_CHECK(cudaMalloc(&ws, std::max<size_t>(ws_bytes, 1)));
  KDTREE_CHECK(kdtree_verify_paged(&v, ws, ws_bytes, nullptr));
  CUDA_CHECK(cudaDeviceSynchronize());
  const auto before = host_copy(d_out, q_len * H * DL);

  void* d_src = device_indices(plan.src, KDTREE_DTYPE_INT32);
  void* d_dst = device_indices(plan.dst, KDTREE_DTYPE_INT32);
  const int64_t n = static_cast<int64_t>(plan.src.size());
  run_copy(L, row_bytes, d_src, d_dst, n, nullptr, nullptr);
  remap_rows(t.d, KDTREE_DTYPE_INT32, 0, t.rows, t.cols, t.cols, t.d_lengths, num_slots, d_src,
             d_dst, KDTREE_DTYPE_INT32, n, nullptr, nullptr, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  poison_slots(L, plan.src);  // NaN-ish bytes: a stale read would show
  const auto moved_table = host_copy(t.d, t.host.size());
  int changed = 0;
  for (int c = 0; c < kv_len; ++c) changed += moved_table[b * t.cols + c] != t.host[b * t.cols + c];
  CUDA_CHECK(cudaMemset(d_out, 0, q_len * H * DL * 2));
  KDTREE_CHECK(kdtree_verify_paged(&v, ws, ws_bytes, nullptr));
  CUDA_CHECK(cudaDeviceSynchronize());
  const auto after = host_copy(d_out, q_len * H * DL);
  CHECK(changed > 0);
  CHECK(before == after);
  std::printf("  verify: request of %d keys, %d relocated, output bitwise %s\n", kv_len, changed,
              before == after ? "identical" : "DIFFERENT");
  for (void* p : {(void*)d_q, (void*)d_qo, (void*)d_kv, (void*)d_out, ws, d_src, d_dst,
                  (void*)t.d, (void*)t.d_lengths}) {
    CUDA_CHECK(cudaFree(p));
  }
  free_layers(L);
}

// ------------------------------------------------------------------------
// CUDA graph: captured once, replayed with new plans in the same buffers
// ------------------------------------------------------------------------

void test_graph_capture(std::mt19937_64& rng) {
  const int64_t num_slots = kdtest::scaled<int64_t>(4000, 1000), row_bytes = 1152,
                max_moves = kdtest::scaled<int64_t>(3000, 750);
  const int64_t first_budget = kdtest::scaled<int64_t>(700, 200);
  Layers L = make_layers(rng, 61, num_slots, row_bytes, false);
  int32_t *d_src = nullptr, *d_dst = nullptr;
  CUDA_CHECK(cudaMalloc(&d_src, max_moves * 4));
  CUDA_CHECK(cudaMalloc(&d_dst, max_moves * 4));
  int64_t* d_count = device_copy(std::vector<int64_t>{0});
  Pool pool = random_pool(rng, num_slots, 30, 100, num_slots / 4);
  Table t = make_table(pool);
  std::vector<int32_t> table_model = t.host;

  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // The remap workspace is allocated before capture (remap_rows allocates once).
  remap_rows(t.d, KDTREE_DTYPE_INT32, 0, t.rows, t.cols, t.cols, t.d_lengths, num_slots, d_src,
             d_dst, KDTREE_DTYPE_INT32, max_moves, d_count, nullptr, stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  run_copy(L, row_bytes, d_src, d_dst, max_moves, d_count, stream);
  remap_rows(t.d, KDTREE_DTYPE_INT32, 0, t.rows, t.cols, t.cols, t.d_lengths, num_slots, d_src,
             d_dst, KDTREE_DTYPE_INT32, max_moves, d_count, nullptr, stream);
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));

  for (int round = 0; round < 2; ++round) {
    // Plan on the current pool; write the plan into the captured buffers.
    Plan plan = plan_pool(pool, round == 0 ? first_budget : max_moves);
    const int64_t n = static_cast<int64_t>(plan.src.size());
    CHECK(n > 0 && n <= max_moves);
    std::vector<int32_t> src(plan.src.begin(), plan.src.end()), dst(plan.dst.begin(), plan.dst.end());
    kdtest::upload(d_src, src.data(), n * 4);
    kdtest::upload(d_dst, dst.data(), n * 4);
    kdtest::upload(d_count, &n, 8);
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));

    model_copy(L, plan, n, row_bytes);
    std::vector<int64_t> map(num_slots, -1);
    for (int64_t m = 0; m < n; ++m) map[plan.src[m]] = plan.dst[m];
    for (auto& v : table_model) if (map[v] >= 0) v = static_cast<int32_t>(map[v]);
    CHECK(host_copy(L.base, L.host.size()) == L.host);
    CHECK(host_copy(t.d, t.host.size()) == table_model);

    apply_plan(pool, plan.src, plan.dst);  // the next round plans the new state
    std::printf("  graph replay %d: %lld moves ok\n", round, (long long)n);
  }
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(stream));
  for (void* p : {(void*)d_src, (void*)d_dst, (void*)d_count, (void*)t.d, (void*)t.d_lengths}) {
    CUDA_CHECK(cudaFree(p));
  }
  free_layers(L);
}

// ------------------------------------------------------------------------
// sort
// ------------------------------------------------------------------------

void test_sort(std::mt19937_64& rng) {
  const int64_t max_count = kdtest::scaled<int64_t>(200000, 20000);
  for (int32_t dtype : {KDTREE_DTYPE_INT32, KDTREE_DTYPE_INT64}) {
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{3}, int64_t{1000}, max_count}) {
      for (int64_t num_slots : {int64_t{1} << 22, count + 5, int64_t{3000000000}}) {
        if (dtype == KDTREE_DTYPE_INT32 && num_slots > (int64_t{1} << 31)) continue;
        std::vector<int64_t> slots(count);
        for (auto& s : slots) s = static_cast<int64_t>(rng() % num_slots);
        void* d = device_indices(slots, dtype);
        size_t bytes = 0;
        KDTREE_CHECK(kdtree_sort_slots_workspace_size(dtype, count, num_slots, &bytes));
        void* ws = nullptr;
        if (bytes) CUDA_CHECK(cudaMalloc(&ws, bytes));
        KDTREE_CHECK(kdtree_sort_slots(d, dtype, count, num_slots, ws, bytes, nullptr));
        CUDA_CHECK(cudaDeviceSynchronize());
        std::sort(slots.begin(), slots.end());
        CHECK(host_indices(d, dtype, count) == slots);
        CUDA_CHECK(cudaFree(d));
        if (ws) CUDA_CHECK(cudaFree(ws));
      }
    }
  }
  std::printf("  sort: int32/int64, counts 0..%lld ok\n", (long long)max_count);
}

// kdtree_sort_slots captured in global mode: each replay sorts what the
// buffer holds then (refilled between replays), as std::sort does.
void test_sort_graph_capture(std::mt19937_64& rng) {
  const int64_t count = kdtest::scaled<int64_t>(50000, 5000), num_slots = int64_t{1} << 22;
  for (int32_t dtype : {KDTREE_DTYPE_INT32, KDTREE_DTYPE_INT64}) {
    const size_t elem = dtype == KDTREE_DTYPE_INT64 ? 8 : 4;
    void* d = nullptr;
    CUDA_CHECK(cudaMalloc(&d, count * elem));
    size_t bytes = 0;
    KDTREE_CHECK(kdtree_sort_slots_workspace_size(dtype, count, num_slots, &bytes));
    void* ws = nullptr;
    if (bytes) CUDA_CHECK(cudaMalloc(&ws, bytes));
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    KDTREE_CHECK(kdtree_sort_slots(d, dtype, count, num_slots, ws, bytes, stream));
    CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int fill = 0; fill < 2; ++fill) {
      std::vector<int64_t> slots(count);
      for (auto& s : slots) s = static_cast<int64_t>(rng() % num_slots);
      const std::vector<int32_t> narrow(slots.begin(), slots.end());
      kdtest::upload(d, dtype == KDTREE_DTYPE_INT64 ? static_cast<const void*>(slots.data()) : narrow.data(), count * elem);
      CUDA_CHECK(cudaGraphLaunch(exec, stream));
      CUDA_CHECK(cudaStreamSynchronize(stream));
      std::sort(slots.begin(), slots.end());
      CHECK(host_indices(d, dtype, count) == slots);
    }
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaStreamDestroy(stream));
    CUDA_CHECK(cudaFree(d));
    if (ws) CUDA_CHECK(cudaFree(ws));
  }
  std::printf("  sort graph replay: int32/int64, two fills of %lld ok\n", (long long)count);
}

}  // namespace

int main() {
  kdtest::require_gpu_or_skip("test_defrag");
  kdtest::announce_light("test_defrag",
                         "copy pools of half the slots, plans <= 200 moves, capture pool 1000 slots, "
                         "sort counts <= 20k, captured sort 5k");
  std::mt19937_64 rng(20261129);
  test_copy(rng);
  test_remap(rng);
  test_protocol(rng);
  test_verify_after_relocation(rng);
  test_graph_capture(rng);
  test_sort(rng);
  test_sort_graph_capture(rng);
  free_remap_workspace();
  if (g_failures) {
    std::printf("test_defrag: %d check(s) FAILED\n", g_failures);
    return 1;
  }
  std::printf("test_defrag: all passed\n");
  return 0;
}
