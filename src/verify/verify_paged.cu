// Host side of kdtree_verify_paged: the split plan, the workspace layout and
// the dispatch from runtime dtypes / device arch to the compiled kernels.
#include <algorithm>

#include "verify/verify_launch.hpp"
#include "verify/verify_paged_sm90a.hpp"
#include "verify/verify_paged_tiles.cuh"

namespace kdtree::verify {

namespace {

constexpr size_t kAlign = 256;
constexpr int kMaxAutoSplits = 64;
constexpr int kMinTilesPerSplit = 4;
// A lead plan's last split runs on the SMs the lead splits leave free, in
// waves: each block of it costs its tiles plus about this many tiles' time
// of once-per-block work (start and epilogue: 7-10 us on an H200, a tile
// 1.7-1.9 us; docs/perf_notes.md, sessions 25 and 32) ...
constexpr int64_t kLeadBlockTiles = 6;
// ... and the plan is taken when it shortens the longest split by this many
// tiles or more (a last split adds a part to the merge).
constexpr int64_t kLeadMinGain = 2;

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// The shape facts the split heuristic needs, of the config a device launches.
struct TileShape {
  int rows, keys, blocks_per_sm;
};
template <class Cfg>
constexpr TileShape shape_of() {
  return {Cfg::kBlockM, Cfg::kBlockN, Cfg::kBlocksPerSm};
}
TileShape tile_shape(TileConfigId config) {
  switch (config) {
    case TileConfigId::kLarge: return shape_of<LargeConfig>();
    case TileConfigId::kMedium: return shape_of<MediumConfig>();
    default: return shape_of<SmallConfig>();
  }
}

// The Hopper wgmma kernels run on compute capability 9.0 when this library
// carries their sm_90a cubin (sm_90a code runs on 9.0 only; a build forcing
// the small config has none, CMakeLists.txt), for every KV dtype.
bool use_sm90a(const DeviceInfo& dev) { return sm90a_built() && dev.cc_major == 9 && dev.cc_minor == 0; }

// The partial states' values keep the output's precision when it is bf16
// (PagedArgs::partial_dtype), else f32.
int32_t partial_dtype(const kdtree_verify_paged_params& p) {
  return p.out_dtype == KDTREE_DTYPE_BF16 ? KDTREE_DTYPE_BF16 : KDTREE_DTYPE_F32;
}
size_t partial_out_bytes(const kdtree_verify_paged_params& p, int splits) {
  const size_t value_bytes = partial_dtype(p) == KDTREE_DTYPE_BF16 ? 2 : 4;
  return align_up(size_t(splits) * size_t(p.total_q) * size_t(p.num_heads) * kLatentDim * value_bytes);
}
size_t partial_lse_bytes(const kdtree_verify_paged_params& p, int splits) {
  return align_up(size_t(splits) * size_t(p.total_q) * size_t(p.num_heads) * sizeof(float));
}

// A lead plan for `blocks` (requests x row tiles) of `splits` auto splits,
// when those leave SMs free: the longest splits hold max_tiles / splits
// tiles, and the free SMs idle. Instead each block row keeps `splits` lead
// splits of T tiles and adds a last split with the rest; the last splits,
// numbered after every lead block, start on the free SMs and then on those
// as each frees, `waves` of them in turn. T is the least with
// waves x (max_tiles - splits T + kLeadBlockTiles) <= T, so they end before
// the lead splits do. (The even spread of FlashMLA's scheduler without a
// block running two requests' keys, which slowed the tile loop itself:
// docs/perf_notes.md, sessions 28 and 32.)
void plan_lead_splits(int64_t blocks, int64_t max_kv_len, int sm_count, Plan* plan) {
  const int splits = plan->num_splits;
  const int64_t free_sms = int64_t(sm_count) - blocks * splits;
  if (free_sms <= 0 || splits + 1 > kMaxSplits) return;
  const int64_t max_tiles = (max_kv_len + kSm90aKeys - 1) / kSm90aKeys;
  const int64_t waves = (blocks + free_sms - 1) / free_sms;
  const int64_t lead = ((max_tiles + kLeadBlockTiles) * waves + splits * waves) / (splits * waves + 1);
  const int64_t even = (max_tiles + splits - 1) / splits;
  if (lead * splits >= max_tiles || even - lead < kLeadMinGain) return;
  plan->lead_keys = lead * kSm90aKeys;
  plan->num_splits = splits + 1;
}

// The plan for one tile shape: one wave, as many splits as keep batch x
// m_tiles x splits within the resident blocks (kBlocksPerSm per SM), never
// splits shorter than a few tiles; with sm90a the kernel by split length and,
// for the ping-pong kernel, a lead plan where that is shorter (chosen before
// the lead plan adds its last split).
Plan plan_for(const kdtree_verify_paged_params& p, const DeviceInfo& dev, TileShape tile, bool sm90a) {
  const int64_t m_tiles = (int64_t(p.max_q_len) * p.num_heads + tile.rows - 1) / tile.rows;
  const int64_t blocks = std::max<int64_t>(1, int64_t(p.batch_size) * m_tiles);
  Plan plan;
  if (p.num_splits > 0) {
    plan.num_splits = p.num_splits;
  } else {
    const int64_t by_sms = std::max<int64_t>(1, int64_t(dev.sm_count) * tile.blocks_per_sm / blocks);
    const int64_t by_len = std::max<int64_t>(1, p.max_kv_len / (int64_t(kMinTilesPerSplit) * tile.keys));
    plan.num_splits = static_cast<int>(std::min<int64_t>({by_sms, by_len, kMaxAutoSplits}));
  }
  if (sm90a) {
    plan.kernel = sm90a_pingpong(p.max_kv_len, plan.num_splits) ? PagedKernel::kSm90aPingPong : PagedKernel::kSm90a;
    if (p.num_splits == 0 && plan.kernel == PagedKernel::kSm90aPingPong) {
      plan_lead_splits(blocks, p.max_kv_len, dev.sm_count, &plan);
    }
  }
  plan.workspace_bytes =
      plan.num_splits > 1 ? partial_out_bytes(p, plan.num_splits) + partial_lse_bytes(p, plan.num_splits) : 0;
  return plan;
}

}  // namespace

// On sm_90a the wgmma kernels' plan (tiles of 64 rows and 64 keys, one block
// an SM), else the portable config's.
Plan make_plan(const kdtree_verify_paged_params& p, const DeviceInfo& dev) {
  if (use_sm90a(dev)) return plan_for(p, dev, TileShape{kSm90aRows, kSm90aKeys, 1}, true);
  const bool fp8 = p.kv_dtype == KDTREE_DTYPE_FP8_E4M3;
  return plan_for(p, dev, tile_shape(config_for_image(dev.image_arch, fp8)), false);
}

// The kernels make_plan can pick on this device (on sm_90a the wgmma kernels
// only, for every KV dtype).
void prepare_kernels(const DeviceInfo& dev, const char* fn) {
  if (use_sm90a(dev)) {
    prepare_sm90a<__nv_bfloat16, false>(dev.smem_optin, fn);
    prepare_sm90a<__half, false>(dev.smem_optin, fn);
    prepare_sm90a<__nv_bfloat16, true>(dev.smem_optin, fn);
    prepare_sm90a<__half, true>(dev.smem_optin, fn);
    prepare_sm90a_pingpong<__nv_bfloat16, false>(dev.smem_optin, fn);
    prepare_sm90a_pingpong<__half, false>(dev.smem_optin, fn);
    prepare_sm90a_pingpong<__nv_bfloat16, true>(dev.smem_optin, fn);
    prepare_sm90a_pingpong<__half, true>(dev.smem_optin, fn);
  } else {
    const TileConfigId config = config_for_image(dev.image_arch, false);
    const TileConfigId fp8_config = config_for_image(dev.image_arch, true);
    prepare_tiles<__nv_bfloat16, false>(config, dev.smem_optin, fn);
    prepare_tiles<__half, false>(config, dev.smem_optin, fn);
    prepare_tiles<__nv_bfloat16, true>(fp8_config, dev.smem_optin, fn);
    prepare_tiles<__half, true>(fp8_config, dev.smem_optin, fn);
  }
}

void launch_paged(const kdtree_verify_paged_params& p, const Plan& plan, void* workspace, const DeviceInfo& dev,
                  cudaStream_t stream) {
  PagedArgs a{};
  a.batch_size = p.batch_size;
  a.num_heads = p.num_heads;
  a.max_q_len = p.max_q_len;
  a.num_splits = plan.num_splits;
  a.lead_keys = plan.lead_keys;
  a.total_q = p.total_q;
  const bool fp8 = p.kv_dtype == KDTREE_DTYPE_FP8_E4M3;
  a.scale_log2 = p.sm_scale * 1.4426950408889634f * (fp8 ? p.kv_scale : 1.f);
  a.out_scale = fp8 ? p.kv_scale : 1.f;
  a.q = p.q;
  a.q_stride_token = p.q_stride_token;
  a.q_stride_head = p.q_stride_head;
  a.kv_cache = p.kv_cache;
  a.kv_stride_slot = p.kv_stride_slot;
  a.num_slots = p.num_slots;
  a.index_is_64 = p.index_dtype == KDTREE_DTYPE_INT64;
  a.qo_indptr = p.qo_indptr;
  a.kv_indptr = p.kv_indptr;
  a.kv_indices = p.kv_indices;
  a.tail_source = p.tail_source;
  a.mask_kind = p.mask_kind;
  a.tail_kv = p.tail_kv;
  a.tail_kv_stride = p.tail_kv_stride;
  a.mask = p.mask;
  a.mask_indptr = p.mask_indptr;
  a.mask_row_bytes = p.mask_row_bytes;
  a.out = p.out;
  a.out_dtype = p.out_dtype;
  a.out_stride_token = p.out_stride_token;
  a.out_stride_head = p.out_stride_head;
  a.lse = p.lse;
  a.error_flag = p.error_flag;
  if (plan.num_splits > 1) {
    a.partial_out = workspace;
    a.partial_dtype = partial_dtype(p);
    a.partial_lse = reinterpret_cast<float*>(static_cast<char*>(workspace) + partial_out_bytes(p, plan.num_splits));
  }

  const TileConfigId config = config_for_image(dev.image_arch, fp8);
  const bool bf16 = p.q_dtype == KDTREE_DTYPE_BF16;
  if (plan.kernel == PagedKernel::kSm90aPingPong && fp8) {
    bf16 ? launch_sm90a_pingpong<__nv_bfloat16, true>(a, stream) : launch_sm90a_pingpong<__half, true>(a, stream);
  } else if (plan.kernel == PagedKernel::kSm90aPingPong) {
    bf16 ? launch_sm90a_pingpong<__nv_bfloat16, false>(a, stream) : launch_sm90a_pingpong<__half, false>(a, stream);
  } else if (plan.kernel == PagedKernel::kSm90a && fp8) {
    bf16 ? launch_sm90a<__nv_bfloat16, true>(a, stream) : launch_sm90a<__half, true>(a, stream);
  } else if (plan.kernel == PagedKernel::kSm90a) {
    bf16 ? launch_sm90a<__nv_bfloat16, false>(a, stream) : launch_sm90a<__half, false>(a, stream);
  } else if (bf16) {
    fp8 ? launch_tiles<__nv_bfloat16, true>(a, config, stream) : launch_tiles<__nv_bfloat16, false>(a, config, stream);
  } else {
    fp8 ? launch_tiles<__half, true>(a, config, stream) : launch_tiles<__half, false>(a, config, stream);
  }
  // The split kernels let the merge launch early in sm_90+ images (it waits for them).
  if (plan.num_splits > 1) launch_split_merge(a, dev.sm_count, dev.image_arch >= 900, stream);
}

}  // namespace kdtree::verify
