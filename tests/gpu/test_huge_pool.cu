// Huge pools: no 32-bit offset anywhere (issue 6).
//
//  - verify: one KV pool of 3.9M slots x 576 bf16 (4.49 GB, one allocation,
//    element offsets past 2^31 and byte offsets past 2^32), NaN in every
//    slot; two requests (q = 16, prefix 4000, TREE_DENSE, H = 16) whose
//    slots are a random permutation of the pool's last 8192 slots, the very
//    last slot included. kdtree_verify_paged (splits 0 and 8) and the GPU
//    oracle, with int32 and int64 indices, against kdtree_verify_paged_host
//    run on a host copy of only those 8192 rows (indices rebased). Then two
//    indices one past the pool's end (and, for int64, past 2^31 + end):
//    flagged, invisible, equal to the host run with the same indices.
//  - defrag copy: the same allocation as two layers (each slot's first and
//    second 576 bytes), slot_stride_bytes 1152, 2000 moves among the last
//    200k slots (layer offsets up to 4.49 GB); the 230 MB region and the
//    guard bands after the pool equal the host model bitwise, for int32 and
//    int64 slot ids.
// About 4.6 GB of device memory and a few seconds. Under a sanitizer
// (light mode) the pool keeps its size (the > 4 GB offsets are the point)
// but the prefixes are 1000 keys and the copy makes 250 moves among the last
// 20k slots; every entry point, index dtype and past-the-end case still runs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "common/gpu_test.hpp"
#include "common/paged_problem.hpp"

using namespace kdtest;

namespace {

constexpr int kDim = 576, kDimLatent = 512, kHeads = 16, kQ = 16;
constexpr int64_t kSlots = 3'900'000;
constexpr int64_t kRowBytes = int64_t(kDim) * 2;  // bf16
constexpr int64_t kRegion = 8192;                  // the verify requests' slots
constexpr int64_t kRegionBase = kSlots - kRegion;
// Each request's prefix: 4000 keys, 1000 under a sanitizer (light mode).
const int64_t kPrefix = scaled<int64_t>(4000, 1000);
constexpr int kBatch = 2;

struct HostProblem {
  std::vector<uint8_t> region;        // kRegion rows, bf16
  std::vector<int64_t> slots;         // absolute slot ids, kv_indptr order
  std::vector<int32_t> qo_indptr, kv_indptr;
  std::vector<uint8_t> q, mask;
  std::vector<int64_t> mask_indptr;
  float sm_scale = 0.05f;
};

HostProblem make_problem(Rng& rng) {
  HostProblem h;
  const int64_t per_request = kPrefix + kQ;
  std::vector<int64_t> perm(kRegion);
  std::iota(perm.begin(), perm.end(), kRegionBase);
  for (int64_t k = kRegion - 1; k > 0; --k) std::swap(perm[k], perm[rng.range(0, k)]);
  h.slots.assign(perm.begin(), perm.begin() + kBatch * per_request);
  if (std::find(h.slots.begin(), h.slots.end(), kSlots - 1) == h.slots.end()) h.slots[0] = kSlots - 1;

  h.region.assign(size_t(kRegion) * kRowBytes, 0xFF);  // 0xFFFF: bf16 NaN
  for (int64_t slot : h.slots)
    for (int d = 0; d < kDim; ++d)
      encode(rng.uniform(-2.0f, 2.0f), KDTREE_DTYPE_BF16, h.region.data(), size_t(slot - kRegionBase) * kDim + d);

  h.qo_indptr = {0, kQ, 2 * kQ};
  h.kv_indptr = {0, int32_t(per_request), int32_t(2 * per_request)};
  h.q.assign(size_t(kBatch) * kQ * kHeads * kDim * 2, 0);
  for (size_t e = 0; e < size_t(kBatch) * kQ * kHeads * kDim; ++e)
    encode(rng.uniform(-2.0f, 2.0f), KDTREE_DTYPE_BF16, h.q.data(), e);
  h.mask_indptr = {0};
  for (int b = 0; b < kBatch; ++b) {
    const std::vector<uint8_t> tree = random_tree(rng, kQ);
    h.mask.insert(h.mask.end(), tree.begin(), tree.end());
    h.mask_indptr.push_back(int64_t(h.mask.size()));
  }
  return h;
}

kdtree_verify_paged_params shape_params(const HostProblem& h, int32_t index_dtype) {
  kdtree_verify_paged_params p;
  KDTREE_CHECK(kdtree_verify_paged_params_init(&p));
  p.batch_size = kBatch;
  p.num_heads = kHeads;
  p.max_q_len = kQ;
  p.total_q = kBatch * kQ;
  p.max_kv_len = kPrefix + kQ;
  p.sm_scale = h.sm_scale;
  p.q_stride_token = int64_t(kHeads) * kDim;
  p.q_stride_head = kDim;
  p.kv_stride_slot = kDim;
  p.index_dtype = index_dtype;
  p.mask_kind = KDTREE_MASK_TREE_DENSE;
  p.out_stride_token = int64_t(kHeads) * kDimLatent;
  p.out_stride_head = kDimLatent;
  return p;
}

struct Outputs {
  std::vector<float> out, lse;
  int32_t flag = 0;
};

// The fp64 host reference over the region only: slot s becomes row s - kRegionBase.
Outputs run_host(const HostProblem& h, const std::vector<int64_t>& slots) {
  std::vector<int64_t> rebased(slots.size());
  for (size_t k = 0; k < slots.size(); ++k) {
    const int64_t s = slots[k];
    rebased[k] = s >= kRegionBase && s < kSlots ? s - kRegionBase : -1;  // outside the pool: invisible, flagged
  }
  Outputs o;
  o.out.assign(size_t(kBatch) * kQ * kHeads * kDimLatent, NAN);
  o.lse.assign(size_t(kBatch) * kQ * kHeads, NAN);
  kdtree_verify_paged_params p = shape_params(h, KDTREE_DTYPE_INT64);
  p.q = h.q.data();
  p.kv_cache = h.region.data();
  p.num_slots = kRegion;
  p.qo_indptr = h.qo_indptr.data();
  p.kv_indptr = h.kv_indptr.data();
  p.kv_indices = rebased.data();
  p.mask = h.mask.data();
  p.mask_indptr = h.mask_indptr.data();
  p.out = o.out.data();
  p.out_dtype = KDTREE_DTYPE_F32;
  p.lse = o.lse.data();
  p.error_flag = &o.flag;
  KDTREE_CHECK(kdtree_verify_paged_host(&p));
  return o;
}

struct DeviceProblem {
  DeviceBuffer q, qo, kv, indices, mask, mask_indptr, out, lse, flag, workspace;
};

void upload_indices(DeviceBuffer& buffer, const std::vector<int64_t>& slots, int32_t index_dtype) {
  if (index_dtype == KDTREE_DTYPE_INT64) {
    buffer.upload(slots);
  } else {
    std::vector<int32_t> narrow(slots.begin(), slots.end());
    buffer.upload(narrow);
  }
}

Outputs run_device(const HostProblem& h, DeviceProblem& d, const DeviceBuffer& pool, int32_t index_dtype,
                   Entry entry, int splits) {
  kdtree_verify_paged_params p = shape_params(h, index_dtype);
  p.num_splits = splits;
  p.q = d.q.data();
  p.kv_cache = pool.data();
  p.num_slots = kSlots;
  p.qo_indptr = d.qo.as<int32_t>();
  p.kv_indptr = d.kv.as<int32_t>();
  p.kv_indices = d.indices.data();
  p.mask = d.mask.as<uint8_t>();
  p.mask_indptr = d.mask_indptr.as<int64_t>();
  p.out = d.out.data();
  p.lse = d.lse.as<float>();
  p.error_flag = d.flag.as<int32_t>();
  d.out.fill(kOutputSentinel);
  d.flag.fill(0);
  if (entry == Entry::kOracle) {
    KDTREE_CHECK(kdtree_verify_paged_reference(&p, nullptr));
  } else {
    size_t bytes = 0;
    KDTREE_CHECK(kdtree_verify_workspace_size(&p, &bytes));
    if (bytes > d.workspace.size()) d.workspace = DeviceBuffer(bytes);
    KDTREE_CHECK(kdtree_verify_paged(&p, d.workspace.data(), d.workspace.size(), nullptr));
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  Outputs o;
  const std::vector<uint8_t> out = d.out.download(), lse = d.lse.download(), flag = d.flag.download();
  o.out.resize(out.size() / 2);
  for (size_t e = 0; e < o.out.size(); ++e) o.out[e] = decode(out.data(), e, KDTREE_DTYPE_BF16);
  o.lse.resize(lse.size() / 4);
  std::memcpy(o.lse.data(), lse.data(), lse.size());
  std::memcpy(&o.flag, flag.data(), 4);
  return o;
}

// Relative Frobenius error of out and max |lse| error; NaN anywhere fails.
bool close(const Outputs& got, const Outputs& ref, double* rel) {
  double diff = 0.0, norm = 0.0, lse_err = 0.0;
  for (size_t e = 0; e < ref.out.size(); ++e) {
    if (std::isnan(got.out[e])) return false;
    diff += (double(got.out[e]) - ref.out[e]) * (double(got.out[e]) - ref.out[e]);
    norm += double(ref.out[e]) * ref.out[e];
  }
  for (size_t e = 0; e < ref.lse.size(); ++e) {
    if (std::isnan(got.lse[e]) || std::isinf(got.lse[e]) != std::isinf(ref.lse[e])) return false;
    if (!std::isinf(ref.lse[e])) lse_err = std::max(lse_err, std::fabs(double(got.lse[e]) - ref.lse[e]));
  }
  *rel = std::sqrt(diff / std::max(norm, 1e-30));
  return *rel <= 5e-3 && lse_err <= 1e-3;
}

void verify_huge_pool(Report& report, Rng& rng, DeviceBuffer& pool) {
  const HostProblem h = make_problem(rng);
  CUDA_CHECK(cudaMemcpy(pool.as<uint8_t>() + size_t(kRegionBase) * kRowBytes, h.region.data(), h.region.size(),
                        cudaMemcpyHostToDevice));
  DeviceProblem d;
  d.q = DeviceBuffer(h.q.size());
  d.q.upload(h.q);
  d.qo = DeviceBuffer(h.qo_indptr.size() * 4);
  d.qo.upload(h.qo_indptr);
  d.kv = DeviceBuffer(h.kv_indptr.size() * 4);
  d.kv.upload(h.kv_indptr);
  d.indices = DeviceBuffer(h.slots.size() * 8);
  d.mask = DeviceBuffer(h.mask.size());
  d.mask.upload(h.mask);
  d.mask_indptr = DeviceBuffer(h.mask_indptr.size() * 8);
  d.mask_indptr.upload(h.mask_indptr);
  d.out = DeviceBuffer(size_t(kBatch) * kQ * kHeads * kDimLatent * 2);
  d.lse = DeviceBuffer(size_t(kBatch) * kQ * kHeads * 4);
  d.flag = DeviceBuffer(4);

  const Outputs reference = run_host(h, h.slots);
  std::vector<int64_t> bad = h.slots;
  bad[5] = kSlots;  // one past the end
  bad[kPrefix + kQ + 7] = kSlots + (int64_t(1) << 31);
  const Outputs reference_bad = run_host(h, bad);
  report.check(reference_bad.flag == KDTREE_FLAG_SLOT_OUT_OF_RANGE, "host reference flags the slots past the pool");

  const std::pair<Entry, int> runs[] = {{Entry::kProduction, 0}, {Entry::kProduction, 8}, {Entry::kOracle, 0}};
  for (int32_t index_dtype : {KDTREE_DTYPE_INT32, KDTREE_DTYPE_INT64}) {
    for (const auto& run : runs) {
      const std::string what = std::string(entry_name(run.first)) + " splits=" + std::to_string(run.second) +
                               (index_dtype == KDTREE_DTYPE_INT64 ? " int64" : " int32");
      upload_indices(d.indices, h.slots, index_dtype);
      const Outputs got = run_device(h, d, pool, index_dtype, run.first, run.second);
      double rel = 0.0;
      report.add_case();
      report.check(close(got, reference, &rel) && got.flag == 0, what + ": off the host reference");
      report.error(rel);

      // int32 cannot hold 2^31 + end: that index is only tried as int64.
      std::vector<int64_t> bad_here = bad;
      if (index_dtype == KDTREE_DTYPE_INT32) bad_here[kPrefix + kQ + 7] = h.slots[kPrefix + kQ + 7];
      const Outputs ref_here = index_dtype == KDTREE_DTYPE_INT32 ? run_host(h, bad_here) : reference_bad;
      upload_indices(d.indices, bad_here, index_dtype);
      const Outputs flagged = run_device(h, d, pool, index_dtype, run.first, run.second);
      report.add_case();
      report.check(flagged.flag == KDTREE_FLAG_SLOT_OUT_OF_RANGE, what + ": slots past the pool not flagged");
      report.check(close(flagged, ref_here, &rel), what + ": slots past the pool not invisible");
    }
  }
  std::printf("verify: pool of %lld slots (%.2f GB), 6 runs + 6 with slots past the end\n",
              static_cast<long long>(kSlots), double(kSlots) * kRowBytes / 1e9);
}

void defrag_huge_pool(Report& report, Rng& rng, DeviceBuffer& pool) {
  const int64_t span = scaled<int64_t>(200'000, 20'000), moves = scaled<int64_t>(2000, 250);
  const int64_t base_slot = kSlots - span;
  uint8_t* const pool_bytes = pool.as<uint8_t>();
  std::vector<uint8_t> model(size_t(span) * kRowBytes);
  for (uint8_t& b : model) b = uint8_t(rng.next());
  CUDA_CHECK(cudaMemcpy(pool_bytes + size_t(base_slot) * kRowBytes, model.data(), model.size(), cudaMemcpyHostToDevice));

  // Two layers: the first and second 576 bytes of each slot.
  const std::vector<uint64_t> bases = {reinterpret_cast<uint64_t>(pool_bytes),
                                       reinterpret_cast<uint64_t>(pool_bytes + kRowBytes / 2)};
  DeviceBuffer d_bases(16), d_src(moves * 8), d_dst(moves * 8), d_flag(4);
  d_bases.upload(bases);
  for (int32_t index_dtype : {KDTREE_DTYPE_INT32, KDTREE_DTYPE_INT64}) {
    // Sources in the lower half of the span, destinations in the upper half.
    std::vector<int64_t> lower(span / 2), upper(span / 2);
    std::iota(lower.begin(), lower.end(), base_slot);
    std::iota(upper.begin(), upper.end(), base_slot + span / 2);
    for (int64_t k = 0; k < moves; ++k) {
      std::swap(lower[k], lower[rng.range(k, span / 2 - 1)]);
      std::swap(upper[k], upper[rng.range(k, span / 2 - 1)]);
    }
    std::vector<int64_t> src(lower.begin(), lower.begin() + moves), dst(upper.begin(), upper.begin() + moves);
    dst[0] = kSlots - 1;  // the pool's last row, 4.49 GB in
    const auto repeated = std::find(dst.begin() + 1, dst.end(), kSlots - 1);
    if (repeated != dst.end()) *repeated = upper[moves];  // destinations stay unique
    upload_indices(d_src, src, index_dtype);
    upload_indices(d_dst, dst, index_dtype);
    d_flag.fill(0);

    kdtree_defrag_copy_params p;
    KDTREE_CHECK(kdtree_defrag_copy_params_init(&p));
    p.num_layers = 2;
    p.layer_base = d_bases.as<const uint64_t>();
    p.slot_stride_bytes = kRowBytes;
    p.row_bytes = kRowBytes / 2;
    p.num_slots = kSlots;
    p.src_slots = d_src.data();
    p.dst_slots = d_dst.data();
    p.index_dtype = index_dtype;
    p.max_moves = moves;
    p.error_flag = d_flag.as<int32_t>();
    KDTREE_CHECK(kdtree_defrag_copy(&p, nullptr));
    CUDA_CHECK(cudaDeviceSynchronize());

    for (int64_t m = 0; m < moves; ++m)
      std::memcpy(&model[size_t(dst[m] - base_slot) * kRowBytes], &model[size_t(src[m] - base_slot) * kRowBytes],
                  kRowBytes);
    std::vector<uint8_t> got(model.size());
    CUDA_CHECK(cudaMemcpy(got.data(), pool_bytes + size_t(base_slot) * kRowBytes, got.size(), cudaMemcpyDeviceToHost));
    int32_t flag = -1;
    CUDA_CHECK(cudaMemcpy(&flag, d_flag.data(), 4, cudaMemcpyDeviceToHost));
    const std::string what = index_dtype == KDTREE_DTYPE_INT64 ? "defrag copy int64" : "defrag copy int32";
    report.add_case();
    report.check(got == model, what + ": the last " + std::to_string(span) + " slots differ from the host model");
    report.check(flag == 0, what + ": a flag was raised");
    report.check(pool.guards_intact(), what + ": guard band after the 4.49 GB pool changed");
  }
  std::printf("defrag: 2 x %lld moves x 2 layers, layer offsets up to %.2f GB\n", static_cast<long long>(moves),
              double(kSlots) * kRowBytes / 1e9);
}

}  // namespace

int main() {
  require_gpu_or_skip("test_huge_pool");
  KDTREE_CHECK(kdtree_prepare(0));
  Rng rng(test_seed());
  Report report("test_huge_pool");
  announce_light("test_huge_pool",
                 "pool size kept (4.49 GB), prefixes 1000 instead of 4000, 250 moves in 20k slots instead of "
                 "2000 in 200k");
  DeviceBuffer pool(size_t(kSlots) * kRowBytes);
  pool.fill(0xFF);  // NaN in every slot
  verify_huge_pool(report, rng, pool);
  defrag_huge_pool(report, rng, pool);
  return report.finish();
}
