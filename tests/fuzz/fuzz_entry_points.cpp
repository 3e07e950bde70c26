// libFuzzer harness over every entry point of include/kdtree_kernels.h
// (the OSS-Fuzz pattern: one LLVMFuzzerTestOneInput, a committed seed corpus,
// ASan + UBSan in the library under test).
//
// The first input byte picks an entry point; the rest fills its params struct
// field by field. Each field is usually drawn from its valid range and
// sometimes from a list of hostile values (negative, one past a bound,
// near-INT64_MAX strides that overflow offsets, NaN scales, unknown dtypes,
// NULL or misaligned pointers, reserved fields set).
//
// Memory rule, so that an ASan report is the library's bug and not ours:
//  - host entry points (verify_paged_host, merge_host, defrag_plan,
//    fragmentation_stats) get exact-size heap buffers for every array the
//    params describe, sized from the fuzzed fields with the formulas of SPEC
//    sections 2 and 5; inputs whose arrays would exceed a few MB are skipped;
//    the data is finite and small so the results can be checked;
//  - device entry points get 16-byte heap buffers: without a GPU they must
//    return after host validation (NO_DEVICE at the latest) and never read
//    through a device pointer (SPEC section 3), so any read is a finding.
//    With a GPU present they are not called (host pointers would fault).
//
// Checks on every call (a failed check aborts: a libFuzzer crash):
//  - the status is one of the ten statuses and never INTERNAL or CUDA;
//  - OK iff kdtree_last_error_message() is empty, and a failure's message
//    starts with "<function>: ";
//  - a rejected call leaves every output byte as it was;
//  - host results: verify rows are untouched or finite with |out| <= 1 (the
//    values are in [-1, 1]), lse never NaN; merge the same, with NaN in every
//    empty state (lse -inf) that must not leak; a plan's moves obey every
//    rule of kdtree_defrag_plan (src live and unpinned, dst free, unique, not
//    reserved, at most budget); the statistics match a recount.
//
// KDTREE_FUZZ_STRICT_KV_INDICES=1 sizes kv_indices to exactly kv_indptr[B]
// entries (the header's [kv_indptr[B]]) instead of the largest range a
// request names; see RELIABILITY.md for what that finds.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kdtree_kernels.h"

namespace {

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int32_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int32_t kI32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kMaxBufferBytes = int64_t(4) << 20;  // per host array
constexpr int64_t kMaxVerifyWork = 8192;               // (row, head, key) triples
constexpr int kDim = 576, kDimLatent = 512;

[[noreturn]] void finding(const char* function, const std::string& what) {
  std::fprintf(stderr, "fuzz_entry_points: %s: %s (last message: \"%s\")\n", function, what.c_str(),
               kdtree_last_error_message());
  std::abort();
}

// Saturating sizes: anything past the cap reads as "too big".
int64_t mul_sat(int64_t a, int64_t b) {
  int64_t r;
  return (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r)) ? kI64Max : r;
}
int64_t add_sat(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? kI64Max : r;
}

// Bytes of the input, consumed front to back; zeros once exhausted.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  uint64_t bits(int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t(byte()) << (8 * i);
    return v;
  }
  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  bool chance(int in_256) { return byte() < in_256; }

  // Usually lo..hi; about 1 in 8 one of `hostile`.
  int64_t field(int64_t lo, int64_t hi, std::initializer_list<int64_t> hostile) {
    if (hostile.size() > 0 && chance(32)) return hostile.begin()[byte() % hostile.size()];
    const uint64_t span = uint64_t(hi - lo) + 1;
    return lo + int64_t(bits(2) % span);
  }
  int32_t field32(int32_t lo, int32_t hi, std::initializer_list<int64_t> hostile) {
    return int32_t(field(lo, hi, hostile));
  }
  float scale(float usual) {
    if (!chance(24)) return usual;
    const float hostile[] = {std::nanf(""), INFINITY, -INFINITY, 0.0f, -0.5f, 1e30f, 1e-30f};
    return hostile[byte() % 7];
  }
  // A stride: `minimum` plus a few multiples of `step`, or a hostile value.
  int64_t stride(int64_t minimum, int64_t step) {
    if (chance(24)) {
      const int64_t hostile[] = {0, -step, minimum - 1, kI64Max, kI64Max - 7, kI64Min};
      return hostile[byte() % 6];
    }
    return add_sat(minimum, step * int64_t(bits(1) % 3));
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// A heap array owned by the harness; the library's pointer is data() (or NULL).
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes, uint8_t fill = 0) : bytes_(bytes), data_(bytes ? bytes : 1, fill) {}
  void* data() { return null_ ? nullptr : data_.data() + offset_; }
  template <class T>
  T* as() { return static_cast<T*>(data()); }
  size_t size() const { return bytes_; }
  const std::vector<uint8_t>& bytes() const { return data_; }
  void make_null() { null_ = true; }
  // Device entry points only: a pointer off by 1..15 bytes (never dereferenced).
  void misalign(size_t offset) {
    data_.resize(data_.size() + 16, 0);
    offset_ = offset;
  }

 private:
  size_t bytes_ = 0;
  std::vector<uint8_t> data_ = std::vector<uint8_t>(1, 0);
  size_t offset_ = 0;
  bool null_ = false;
};

// A harness buffer holding a copy of `values` (memcpy of nothing skipped).
template <class T>
Buffer buffer_of(const std::vector<T>& values) {
  Buffer b(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(b.data(), values.data(), values.size() * sizeof(T));
  return b;
}

// A 16-byte stand-in for a device array, sometimes NULL or misaligned.
Buffer device_array(Input& in) {
  Buffer b(16);
  const uint8_t mode = in.byte();
  if (mode < 12) b.make_null();
  else if (mode < 24) b.misalign(1 + mode % 15);
  return b;
}

// Elements a strided tensor spans: 0 when empty, else the last element + 1.
int64_t span(std::initializer_list<std::pair<int64_t, int64_t>> extent_stride, int64_t row) {
  int64_t last = 0;
  for (const auto& es : extent_stride) {
    if (es.first <= 0) return 0;
    if (es.first > 1) last = add_sat(last, mul_sat(es.first - 1, es.second));
  }
  return add_sat(last, row);
}

size_t dtype_size(int32_t dtype) {
  switch (dtype) {
    case KDTREE_DTYPE_F32: case KDTREE_DTYPE_INT32: return 4;
    case KDTREE_DTYPE_BF16: case KDTREE_DTYPE_F16: return 2;
    case KDTREE_DTYPE_FP8_E4M3: return 1;
    case KDTREE_DTYPE_INT64: return 8;
    default: return 0;
  }
}

// Small finite values in [-1, 1] of `dtype` (bf16 / f16 / f32 / fp8 e4m3).
void fill_values(Buffer& b, int32_t dtype, uint32_t seed) {
  uint8_t* p = static_cast<uint8_t*>(b.data());
  const size_t bytes = b.size();
  for (size_t i = 0; i < bytes; ++i) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = uint8_t(seed >> 24);
  }
  const size_t n = dtype_size(dtype) ? bytes / dtype_size(dtype) : 0;
  for (size_t i = 0; i < n; ++i) {
    switch (dtype) {
      case KDTREE_DTYPE_F32: {
        float v = float(int(p[4 * i] % 201) - 100) / 100.0f;
        std::memcpy(p + 4 * i, &v, 4);
        break;
      }
      case KDTREE_DTYPE_BF16:  // sign, exponent 2^-7..2^-1, random mantissa: |v| < 1
        p[2 * i + 1] = uint8_t((p[2 * i + 1] & 0x80) | (0x3C + p[2 * i] % 3));
        break;
      case KDTREE_DTYPE_F16:  // exponent 2^-4..2^-1
        p[2 * i + 1] = uint8_t((p[2 * i + 1] & 0x80) | ((11 + p[2 * i + 1] % 3) << 2) | (p[2 * i] & 3));
        break;
      case KDTREE_DTYPE_FP8_E4M3:  // exponent 2^-3..2^-1 (bias 7): |v| < 1
        p[i] = uint8_t((p[i] & 0x80) | ((4 + p[i] % 3) << 3) | (p[i] & 7));
        break;
      default:
        break;
    }
  }
}

// The call's status and message obey the header's conventions.
void check_status(const char* function, kdtree_status status) {
  const std::string message = kdtree_last_error_message();
  if (status < KDTREE_OK || status > KDTREE_ERROR_INTERNAL) finding(function, "unknown status " + std::to_string(status));
  if (status == KDTREE_ERROR_INTERNAL) finding(function, "KDTREE_ERROR_INTERNAL (an exception escaped the checks)");
  if (status == KDTREE_ERROR_CUDA) finding(function, "KDTREE_ERROR_CUDA without a device call");
  if (status == KDTREE_OK && !message.empty()) finding(function, "OK with a message");
  if (status != KDTREE_OK && message.rfind(std::string(function) + ": ", 0) != 0)
    finding(function, "message does not start with the function name");
}

// A rejected call writes nothing.
void check_untouched(const char* function, kdtree_status status,
                     const std::vector<std::pair<const Buffer*, std::vector<uint8_t>>>& before) {
  if (status == KDTREE_OK) return;
  for (const auto& entry : before)
    if (entry.first->bytes() != entry.second) finding(function, "a rejected call wrote an output");
}

bool g_have_device = false;

// ---------------------------------------------------------------------------
// kdtree_verify_paged_params: host reference with real buffers, device entry
// points with stand-ins.
// ---------------------------------------------------------------------------

struct PagedDraw {
  kdtree_verify_paged_params p;
  std::vector<int32_t> q_lens;
  std::vector<int64_t> kv_lens;
  bool corrupt_indptr = false;
};

PagedDraw draw_paged(Input& in) {
  PagedDraw d;
  kdtree_verify_paged_params& p = d.p;
  kdtree_verify_paged_params_init(&p);
  if (in.chance(6)) p.struct_size = uint32_t(in.field(0, sizeof(p) + 8, {}));
  p.batch_size = in.field32(0, 5, {-1, kI32Min, 0});
  p.num_heads = in.field32(1, 8, {0, -1, 128, 129, kI32Max});
  if (in.chance(8)) p.head_dim_latent = in.field32(0, 1024, {-512});
  if (in.chance(8)) p.head_dim_rope = in.field32(0, 128, {-64});
  p.max_q_len = in.field32(1, 9, {0, -1, 128, 129});
  p.max_kv_len = in.field(0, 300, {-1, kI64Max});
  p.num_splits = in.field32(0, 8, {-1, 128, 129, kI32Max});
  p.sm_scale = in.scale(0.0417f);
  p.q_dtype = in.field32(KDTREE_DTYPE_BF16, KDTREE_DTYPE_F16, {KDTREE_DTYPE_F32, KDTREE_DTYPE_FP8_E4M3, 99, -1});
  p.kv_dtype = in.chance(64) ? KDTREE_DTYPE_FP8_E4M3
                             : in.field32(p.q_dtype, p.q_dtype, {KDTREE_DTYPE_BF16, KDTREE_DTYPE_F16, KDTREE_DTYPE_INT64, 6});
  p.kv_scale = in.scale(0.5f);
  p.out_dtype = in.field32(KDTREE_DTYPE_F32, KDTREE_DTYPE_F16, {KDTREE_DTYPE_FP8_E4M3, KDTREE_DTYPE_INT32, -7});
  p.index_dtype = in.field32(KDTREE_DTYPE_INT32, KDTREE_DTYPE_INT64, {KDTREE_DTYPE_BF16, 77});
  p.tail_source = in.field32(KDTREE_TAIL_FROM_INDICES, KDTREE_TAIL_FROM_EXTEND, {2, -1});
  p.mask_kind = in.field32(KDTREE_MASK_NONE, KDTREE_MASK_SGLANG_FULL, {5, -1});
  p.mask_row_bytes = add_sat((int64_t(p.max_q_len) + 7) / 8, in.field(0, 2, {0, -1, kI64Max}));
  if (in.chance(6)) p.reserved0 = 1;
  if (in.chance(6)) p.reserved1 = -1;
  if (in.chance(6)) p.reserved2 = 2;

  // Request lengths, then the rows they need.
  const int32_t batch = std::max(p.batch_size, 0);
  int64_t rows = 0;
  for (int32_t b = 0; b < batch && b < 64; ++b) {
    d.q_lens.push_back(int32_t(in.field(0, std::max(p.max_q_len, 1), {int64_t(p.max_q_len) + 1})));
    d.kv_lens.push_back(in.field(0, 40, {0, 1}) + (p.tail_source == KDTREE_TAIL_FROM_INDICES ? d.q_lens.back() : 0));
    rows += d.q_lens.back();
  }
  p.total_q = add_sat(rows, in.field(0, 2, {-1, -int64_t(rows) - 1, kI64Max}));
  d.corrupt_indptr = in.chance(24);

  p.q_stride_head = in.stride(kDim, 8);
  p.q_stride_token = in.stride(int64_t(std::max(p.num_heads, 1)) * kDim, 8);
  p.kv_stride_slot = in.stride(kDim, 8);
  p.tail_kv_stride = in.stride(kDim, 8);
  p.out_stride_head = in.stride(kDimLatent, 8);
  p.out_stride_token = in.stride(int64_t(std::max(p.num_heads, 1)) * kDimLatent, 8);
  p.num_slots = in.field(1, 120, {0, -1, kI64Max});
  return d;
}

// Per request, what the library may read, by the rules of SPEC section 2 and
// src/reference/verify_paged_host.cpp: a request with a bad range is skipped,
// one with q_len 0 reads nothing, TAIL_FROM_INDICES with kv_len < q_len reads
// no index.
struct RequestReads {
  bool reads_indices = false, reads_mask = false;
  int64_t kv_begin = 0, kv_end = 0, mask_extent = 0, work = 0;
};

RequestReads request_reads(const kdtree_verify_paged_params& p, const int32_t* qo, const int32_t* kv, int64_t b) {
  RequestReads r;
  const int64_t qb = qo[b], qe = qo[b + 1], kb = kv[b], ke = kv[b + 1];
  if (qb < 0 || qe < qb || kb < 0 || ke < kb || qe - qb > p.max_q_len || qe > p.total_q) return r;
  const int64_t q_len = qe - qb, kv_len = ke - kb;
  if (q_len == 0) return r;
  const bool from_indices = p.tail_source == KDTREE_TAIL_FROM_INDICES;
  if (from_indices && kv_len < q_len) return r;
  const int64_t prefix = from_indices ? kv_len - q_len : kv_len;
  r.reads_indices = true;
  r.kv_begin = kb;
  r.kv_end = ke;
  r.reads_mask = p.mask_kind == KDTREE_MASK_TREE_DENSE || p.mask_kind == KDTREE_MASK_TREE_BITS ||
                 p.mask_kind == KDTREE_MASK_SGLANG_FULL;
  if (p.mask_kind == KDTREE_MASK_TREE_DENSE) r.mask_extent = q_len * q_len;
  if (p.mask_kind == KDTREE_MASK_TREE_BITS) r.mask_extent = mul_sat(q_len, p.mask_row_bytes);
  if (p.mask_kind == KDTREE_MASK_SGLANG_FULL) r.mask_extent = mul_sat(q_len, add_sat(prefix, q_len));
  r.work = mul_sat(mul_sat(q_len, p.num_heads), add_sat(kv_len, from_indices ? 0 : q_len));
  return r;
}

bool valid_float_dtype(int32_t dtype) {
  return dtype == KDTREE_DTYPE_F32 || dtype == KDTREE_DTYPE_BF16 || dtype == KDTREE_DTYPE_F16;
}

float decode_out(const uint8_t* base, size_t index, int32_t dtype) {
  if (dtype == KDTREE_DTYPE_F32) {
    float v;
    std::memcpy(&v, base + 4 * index, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, base + 2 * index, 2);
  if (dtype == KDTREE_DTYPE_BF16) {
    uint32_t bits = uint32_t(h) << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
  }
  // f16
  const int exponent = (h >> 10) & 31, mantissa = h & 1023;
  float v = exponent == 0 ? std::ldexp(float(mantissa), -24)
            : exponent == 31 ? (mantissa ? NAN : INFINITY)
                             : std::ldexp(float(mantissa | 1024), exponent - 25);
  return (h & 0x8000) ? -v : v;
}

void fuzz_verify_host(Input& in) {
  const char* fn = "kdtree_verify_paged_host";
  PagedDraw d = draw_paged(in);
  kdtree_verify_paged_params& p = d.p;
  const int64_t batch = std::max<int64_t>(p.batch_size, 0);
  if (batch > 64) return;

  // The segmented batch, sometimes corrupted (the library must flag it).
  std::vector<int32_t> qo(batch + 1, 0), kv(batch + 1, 0);
  for (int64_t b = 0; b < batch; ++b) {
    qo[b + 1] = qo[b] + d.q_lens[b];
    kv[b + 1] = kv[b] + int32_t(d.kv_lens[b]);
  }
  if (d.corrupt_indptr && batch > 0) {
    std::vector<int32_t>& which = in.chance(128) ? qo : kv;
    which[in.byte() % (batch + 1)] = int32_t(in.field(-3, 60, {kI32Max, kI32Min}));
  }

  const size_t q_bytes = dtype_size(p.q_dtype), kv_bytes = dtype_size(p.kv_dtype),
               out_bytes = dtype_size(p.out_dtype), index_bytes = dtype_size(p.index_dtype);
  const bool dtypes_known = q_bytes && kv_bytes && out_bytes && index_bytes;
  const int64_t heads = p.num_heads >= 1 && p.num_heads <= 128 ? p.num_heads : 0;

  // Index and mask extents from the requests the library would read.
  int64_t index_entries = std::max<int64_t>(kv[batch], 0), mask_bytes = 0, work = 0;
  std::vector<int64_t> mask_indptr(batch + 1, 0);
  int64_t offset = 0;
  for (int64_t b = 0; b < batch; ++b) {
    RequestReads r = request_reads(p, qo.data(), kv.data(), b);
    offset = add_sat(offset, in.field(0, 3, {}));
    mask_indptr[b] = offset;
    if (r.reads_indices && !std::getenv("KDTREE_FUZZ_STRICT_KV_INDICES"))
      index_entries = std::max(index_entries, r.kv_end);
    if (r.reads_mask) mask_bytes = std::max(mask_bytes, add_sat(offset, r.mask_extent));
    offset = add_sat(offset, r.mask_extent);
    work = add_sat(work, r.work);
  }
  mask_indptr[batch] = offset;
  const bool extend = p.tail_source == KDTREE_TAIL_FROM_EXTEND;
  const int64_t q_elems = span({{p.total_q, p.q_stride_token}, {heads, p.q_stride_head}}, kDim);
  const int64_t kv_elems = span({{p.num_slots, p.kv_stride_slot}}, kDim);
  const int64_t tail_elems = extend ? span({{p.total_q, p.tail_kv_stride}}, kDim) : 0;
  const int64_t out_elems = span({{p.total_q, p.out_stride_token}, {heads, p.out_stride_head}}, kDimLatent);
  const int64_t lse_elems = mul_sat(std::max<int64_t>(p.total_q, 0), heads);
  for (int64_t bytes : {mul_sat(q_elems, 4), mul_sat(kv_elems, 4), mul_sat(tail_elems, 4), mul_sat(out_elems, 4),
                        mul_sat(lse_elems, 4), mul_sat(index_entries, 8), mask_bytes})
    if (bytes > kMaxBufferBytes) return;
  if (work > kMaxVerifyWork) return;

  const uint32_t seed = uint32_t(in.bits(4));
  Buffer q(size_t(q_elems) * q_bytes), cache(size_t(kv_elems) * kv_bytes), tail(size_t(tail_elems) * kv_bytes);
  if (dtypes_known) {
    fill_values(q, p.q_dtype, seed);
    fill_values(cache, p.kv_dtype, seed + 1);
    fill_values(tail, p.kv_dtype, seed + 2);
  }
  Buffer qo_buf = buffer_of(qo), kv_buf = buffer_of(kv), mask_indptr_buf = buffer_of(mask_indptr);
  Buffer indices(size_t(index_entries) * (index_bytes ? index_bytes : 1));
  for (int64_t k = 0; k < index_entries; ++k) {
    const int64_t slot = in.chance(16) ? in.field(-2, std::min<int64_t>(p.num_slots, 1 << 20) + 2, {kI64Max, kI64Min, int64_t(1) << 32})
                                       : int64_t(in.bits(2)) % std::max<int64_t>(p.num_slots, 1);
    if (index_bytes == 8) indices.as<int64_t>()[k] = slot;
    else if (index_bytes == 4) indices.as<int32_t>()[k] = int32_t(slot);
  }
  Buffer mask(static_cast<size_t>(mask_bytes));
  for (int64_t k = 0; k < mask_bytes; ++k) static_cast<uint8_t*>(mask.data())[k] = in.byte();
  // Untouched rows read as NaN (f32 / bf16 / f16 sentinels all decode to NaN).
  Buffer out(size_t(out_elems) * (out_bytes ? out_bytes : 1), 0xFF), lse(size_t(lse_elems) * 4, 0xFF), flag(4, 0);

  p.q = q.data();
  p.kv_cache = cache.data();
  p.qo_indptr = qo_buf.as<int32_t>();
  p.kv_indptr = kv_buf.as<int32_t>();
  p.kv_indices = indices.data();
  p.tail_kv = extend || in.chance(128) ? tail.data() : nullptr;
  p.mask = mask.as<uint8_t>();
  p.mask_indptr = mask_indptr_buf.as<int64_t>();
  p.out = out.data();
  p.lse = in.chance(200) ? lse.as<float>() : nullptr;
  p.error_flag = in.chance(200) ? flag.as<int32_t>() : nullptr;
  switch (in.field(0, 0, {1, 2, 3, 4, 5})) {  // a NULL required pointer now and then
    case 1: p.q = nullptr; break;
    case 2: p.kv_indices = nullptr; break;
    case 3: p.mask = nullptr; break;
    case 4: p.out = nullptr; break;
    case 5: p.qo_indptr = nullptr; break;
    default: break;
  }

  const auto before = std::vector<std::pair<const Buffer*, std::vector<uint8_t>>>{
      {&out, out.bytes()}, {&lse, lse.bytes()}, {&flag, flag.bytes()}};
  const kdtree_status status = kdtree_verify_paged_host(&p);
  check_status(fn, status);
  check_untouched(fn, status, before);
  if (status != KDTREE_OK || p.batch_size == 0) return;
  if (p.kv_dtype == KDTREE_DTYPE_FP8_E4M3 || !valid_float_dtype(p.out_dtype)) return;

  // Every value row is a convex combination of values in [-1, 1].
  for (int64_t e = 0; e < out_elems; ++e) {
    const float v = decode_out(static_cast<const uint8_t*>(out.data()), size_t(e), p.out_dtype);
    if (!std::isnan(v) && !(std::fabs(v) <= 1.01f)) finding(fn, "out value outside [-1, 1]: " + std::to_string(v));
  }
  if (p.lse && std::isfinite(p.sm_scale) && std::fabs(p.sm_scale) < 1e3f) {
    for (int64_t t = 0; t < p.total_q; ++t) {
      for (int64_t h = 0; h < heads; ++h) {
        uint32_t bits;
        std::memcpy(&bits, static_cast<const uint8_t*>(lse.data()) + 4 * (t * heads + h), 4);
        float v;
        std::memcpy(&v, &bits, 4);
        if (bits != 0xFFFFFFFFu && (std::isnan(v) || v == INFINITY)) finding(fn, "lse NaN or +inf");
      }
    }
  }
}

// Device entry points taking kdtree_verify_paged_params.
void fuzz_verify_device(Input& in, int which) {
  PagedDraw d = draw_paged(in);
  kdtree_verify_paged_params& p = d.p;
  p.total_q = in.field(0, 40, {-1, kI64Max});
  Buffer q = device_array(in), cache = device_array(in), qo = device_array(in), kv = device_array(in),
         indices = device_array(in), tail = device_array(in), mask = device_array(in),
         mask_indptr = device_array(in), out = device_array(in), lse = device_array(in),
         flag = device_array(in), workspace = device_array(in);
  p.q = q.data();
  p.kv_cache = cache.data();
  p.qo_indptr = qo.as<int32_t>();
  p.kv_indptr = kv.as<int32_t>();
  p.kv_indices = indices.data();
  p.tail_kv = tail.data();
  p.mask = mask.as<uint8_t>();
  p.mask_indptr = mask_indptr.as<int64_t>();
  p.out = out.data();
  p.lse = in.chance(128) ? lse.as<float>() : nullptr;
  p.error_flag = in.chance(128) ? flag.as<int32_t>() : nullptr;
  const kdtree_verify_paged_params* params = in.chance(4) ? nullptr : &p;

  if (which == 0) {
    size_t bytes = 12345;
    size_t* bytes_out = in.chance(4) ? nullptr : &bytes;
    const kdtree_status status = kdtree_verify_workspace_size(params, bytes_out);
    check_status("kdtree_verify_workspace_size", status);
    if (status != KDTREE_OK && bytes != 12345) finding("kdtree_verify_workspace_size", "rejected call wrote the size");
    return;
  }
  if (g_have_device) return;
  const std::vector<std::pair<const Buffer*, std::vector<uint8_t>>> before = {
      {&out, out.bytes()}, {&lse, lse.bytes()}, {&flag, flag.bytes()}, {&workspace, workspace.bytes()}};
  const char* fn = which == 1 ? "kdtree_verify_paged" : "kdtree_verify_paged_reference";
  const kdtree_status status =
      which == 1 ? kdtree_verify_paged(params, workspace.data(), size_t(in.field(0, 1 << 20, {0, 1})), nullptr)
                 : kdtree_verify_paged_reference(params, nullptr);
  check_status(fn, status);
  check_untouched(fn, status, before);  // without a GPU nothing is written, OK or not
  if (status == KDTREE_OK && p.batch_size != 0) finding(fn, "OK without a device");
}

void fuzz_verify_contiguous(Input& in) {
  if (g_have_device) return;
  const char* fn = "kdtree_verify_contiguous";
  kdtree_verify_contiguous_params p;
  kdtree_verify_contiguous_params_init(&p);
  if (in.chance(6)) p.struct_size = uint32_t(in.field(0, sizeof(p) + 8, {}));
  p.num_heads = in.field32(1, 16, {0, -1, 129});
  if (in.chance(8)) p.head_dim_latent = in.field32(0, 1024, {});
  if (in.chance(8)) p.head_dim_rope = in.field32(0, 128, {});
  p.q_len = in.field32(0, 16, {-1, 128, 129, kI32Min});
  p.dtype = in.field32(KDTREE_DTYPE_F32, KDTREE_DTYPE_BF16, {KDTREE_DTYPE_F16, KDTREE_DTYPE_INT32, 42});
  p.kv_len = add_sat(p.q_len, in.field(0, 100, {-1, kI64Max, kI64Min}));
  p.sm_scale = in.scale(0.04f);
  p.mask_kind = in.field32(KDTREE_MASK_NONE, KDTREE_MASK_SGLANG_FULL, {-1, 5});
  p.q_stride_head = in.stride(kDim, 8);
  p.q_stride_token = in.stride(int64_t(std::max(p.num_heads, 1)) * kDim, 8);
  p.kv_stride = in.stride(kDim, 8);
  p.mask_row_bytes = (int64_t(p.q_len) + 7) / 8 + in.field(0, 1, {-1});
  p.out_dtype = in.field32(KDTREE_DTYPE_F32, KDTREE_DTYPE_BF16, {KDTREE_DTYPE_F16, -1});
  p.out_stride_head = in.stride(kDimLatent, 8);
  p.out_stride_token = in.stride(int64_t(std::max(p.num_heads, 1)) * kDimLatent, 8);
  if (in.chance(6)) p.reserved0 = 3;
  Buffer q = device_array(in), kv = device_array(in), mask = device_array(in), out = device_array(in),
         lse = device_array(in);
  p.q = q.data();
  p.kv = kv.data();
  p.mask = mask.as<uint8_t>();
  p.out = out.data();
  p.lse = in.chance(128) ? lse.as<float>() : nullptr;
  const std::vector<std::pair<const Buffer*, std::vector<uint8_t>>> before = {{&out, out.bytes()}, {&lse, lse.bytes()}};
  const kdtree_status status = kdtree_verify_contiguous(in.chance(4) ? nullptr : &p, nullptr);
  check_status(fn, status);
  check_untouched(fn, status, before);
}

// ---------------------------------------------------------------------------
// Merge
// ---------------------------------------------------------------------------

kdtree_merge_params draw_merge(Input& in) {
  kdtree_merge_params p;
  kdtree_merge_params_init(&p);
  if (in.chance(6)) p.struct_size = uint32_t(in.field(0, sizeof(p) + 8, {}));
  p.num_states = in.field32(1, 5, {0, -1, kI32Max});
  p.num_tokens = in.field(0, 6, {-1, kI64Max, 0});
  p.num_heads = in.field32(1, 4, {0, -1, kI32Max});
  p.head_dim = 8 * in.field32(1, 8, {0, 128, 129}) + (in.chance(8) ? in.field32(1, 7, {-16}) : 0);
  p.states_dtype = in.field32(KDTREE_DTYPE_F32, KDTREE_DTYPE_F16, {KDTREE_DTYPE_FP8_E4M3, -1, 9});
  p.out_dtype = in.field32(KDTREE_DTYPE_F32, KDTREE_DTYPE_F16, {KDTREE_DTYPE_INT64, 12});
  if (in.chance(6)) p.reserved0 = 1;
  if (in.chance(6)) p.reserved1 = 1;
  const int64_t dim = std::max(p.head_dim, 1);
  p.states_stride_head = in.stride(dim, 8);
  p.states_stride_token = in.stride(mul_sat(std::max(p.num_heads, 1), std::max<int64_t>(p.states_stride_head, dim)), 8);
  p.states_stride_state = in.stride(mul_sat(std::max<int64_t>(p.num_tokens, 1), std::max<int64_t>(p.states_stride_token, dim)), 8);
  p.out_stride_head = in.stride(dim, 8);
  p.out_stride_token = in.stride(mul_sat(std::max(p.num_heads, 1), std::max<int64_t>(p.out_stride_head, dim)), 8);
  return p;
}

void fuzz_merge_host(Input& in) {
  const char* fn = "kdtree_merge_attention_states_host";
  kdtree_merge_params p = draw_merge(in);
  const int64_t states = p.num_states >= 1 ? p.num_states : 0, heads = p.num_heads >= 1 ? p.num_heads : 0;
  const int64_t tokens = std::max<int64_t>(p.num_tokens, 0);
  const int64_t dim = p.head_dim >= 1 && p.head_dim <= 1024 ? p.head_dim : 0;
  const int64_t state_elems =
      span({{states, p.states_stride_state}, {tokens, p.states_stride_token}, {heads, p.states_stride_head}}, dim);
  const int64_t out_elems = span({{tokens, p.out_stride_token}, {heads, p.out_stride_head}}, dim);
  const int64_t rows = mul_sat(tokens, heads), lse_elems = mul_sat(states, rows);
  for (int64_t bytes : {mul_sat(state_elems, 4), mul_sat(out_elems, 4), mul_sat(lse_elems, 4), mul_sat(rows, 4)})
    if (bytes > kMaxBufferBytes) return;
  const size_t s_bytes = dtype_size(p.states_dtype), o_bytes = dtype_size(p.out_dtype);

  Buffer values(size_t(state_elems) * (s_bytes ? s_bytes : 1)), lse_in(size_t(lse_elems) * 4);
  if (s_bytes) fill_values(values, p.states_dtype, uint32_t(in.bits(4)));
  float* lse_values = lse_in.as<float>();
  for (int64_t k = 0; k < lse_elems; ++k) {
    lse_values[k] = in.chance(40) ? -INFINITY : float(int(in.byte()) - 128) / 16.0f;
    // An empty state's values are poison: they must not reach the output.
    if (lse_values[k] == -INFINITY && s_bytes && valid_float_dtype(p.states_dtype) && dim > 0) {
      const int64_t s = k / rows, t = (k % rows) / heads, h = k % heads;
      const int64_t base = s * p.states_stride_state + t * p.states_stride_token + h * p.states_stride_head;
      for (int64_t e = 0; e < dim; ++e) std::memset(static_cast<uint8_t*>(values.data()) + (base + e) * s_bytes, 0xFF, s_bytes);
    }
  }
  Buffer out(size_t(out_elems) * (o_bytes ? o_bytes : 1), 0xFF), lse(size_t(std::max<int64_t>(rows, 0)) * 4, 0xFF);
  p.states = values.data();
  p.states_lse = lse_in.as<float>();
  p.out = out.data();
  p.lse = in.chance(200) ? lse.as<float>() : nullptr;
  switch (in.field(0, 0, {1, 2, 3})) {
    case 1: p.states = nullptr; break;
    case 2: p.states_lse = nullptr; break;
    case 3: p.out = nullptr; break;
    default: break;
  }
  const std::vector<std::pair<const Buffer*, std::vector<uint8_t>>> before = {{&out, out.bytes()}, {&lse, lse.bytes()}};
  const kdtree_status status = kdtree_merge_attention_states_host(in.chance(4) ? nullptr : &p);
  check_status(fn, status);
  check_untouched(fn, status, before);
  if (status != KDTREE_OK || tokens == 0) return;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t e = 0; e < dim; ++e) {
        const float v = decode_out(static_cast<const uint8_t*>(out.data()),
                                   size_t(t * p.out_stride_token + h * p.out_stride_head + e), p.out_dtype);
        if (!(std::fabs(v) <= 1.01f)) finding(fn, "merged value not in [-1, 1] (poison leaked?): " + std::to_string(v));
      }
      if (p.lse && std::isnan(p.lse[t * heads + h])) finding(fn, "merged lse is NaN");
    }
  }
}

void fuzz_merge_device(Input& in) {
  if (g_have_device) return;
  const char* fn = "kdtree_merge_attention_states";
  kdtree_merge_params p = draw_merge(in);
  Buffer states = device_array(in), lse_in = device_array(in), out = device_array(in), lse = device_array(in);
  p.states = states.data();
  p.states_lse = lse_in.as<float>();
  p.out = out.data();
  p.lse = in.chance(128) ? lse.as<float>() : nullptr;
  const std::vector<std::pair<const Buffer*, std::vector<uint8_t>>> before = {{&out, out.bytes()}, {&lse, lse.bytes()}};
  const kdtree_status status = kdtree_merge_attention_states(in.chance(4) ? nullptr : &p, nullptr);
  check_status(fn, status);
  check_untouched(fn, status, before);
}

// ---------------------------------------------------------------------------
// Defragmentation
// ---------------------------------------------------------------------------

void fuzz_defrag_device(Input& in, int which) {
  if (which == 0 && !g_have_device) {
    const char* fn = "kdtree_defrag_copy";
    kdtree_defrag_copy_params p;
    kdtree_defrag_copy_params_init(&p);
    if (in.chance(6)) p.struct_size = uint32_t(in.field(0, sizeof(p) + 8, {}));
    p.num_layers = in.field32(1, 61, {0, -1});
    p.row_bytes = in.field(1, 1152, {0, -1, kI64Max});
    p.slot_stride_bytes = add_sat(p.row_bytes, in.field(0, 64, {-1, kI64Max}));
    p.num_slots = in.field(0, 1 << 20, {-1, kI64Max});
    p.index_dtype = in.field32(KDTREE_DTYPE_INT32, KDTREE_DTYPE_INT64, {KDTREE_DTYPE_F32, 8});
    if (in.chance(6)) p.reserved0 = 1;
    p.max_moves = in.field(0, 4096, {-1, kI64Max});
    Buffer base = device_array(in), src = device_array(in), dst = device_array(in), count = device_array(in),
           flag = device_array(in);
    p.layer_base = base.as<const uint64_t>();
    p.src_slots = src.data();
    p.dst_slots = dst.data();
    p.num_moves = in.chance(128) ? count.as<const int64_t>() : nullptr;
    p.error_flag = in.chance(128) ? flag.as<int32_t>() : nullptr;
    const std::vector<std::pair<const Buffer*, std::vector<uint8_t>>> before = {{&flag, flag.bytes()}};
    const kdtree_status status = kdtree_defrag_copy(in.chance(4) ? nullptr : &p, nullptr);
    check_status(fn, status);
    check_untouched(fn, status, before);
    return;
  }
  if (which == 1) {
    kdtree_defrag_remap_params p;
    kdtree_defrag_remap_params_init(&p);
    if (in.chance(6)) p.struct_size = uint32_t(in.field(0, sizeof(p) + 8, {}));
    p.table_dtype = in.field32(KDTREE_DTYPE_INT32, KDTREE_DTYPE_INT64, {KDTREE_DTYPE_F16, -2});
    p.rows = in.field(0, 512, {-1, kI64Max});
    p.cols = in.field(0, 4096, {-1, kI64Max});
    p.row_stride = add_sat(p.cols, in.field(0, 8, {-1, kI64Max - 4096}));
    p.num_slots = in.field(0, 1 << 22, {-1, kI64Max, int64_t(1) << 40});
    p.index_dtype = in.field32(KDTREE_DTYPE_INT32, KDTREE_DTYPE_INT64, {KDTREE_DTYPE_BF16});
    if (in.chance(6)) p.reserved0 = 1;
    p.max_moves = in.field(0, 4096, {-1});
    Buffer table = device_array(in), lengths = device_array(in), src = device_array(in), dst = device_array(in),
           count = device_array(in), flag = device_array(in), workspace = device_array(in);
    p.table = table.data();
    p.row_lengths = in.chance(128) ? lengths.as<const int32_t>() : nullptr;
    p.src_slots = src.data();
    p.dst_slots = dst.data();
    p.num_moves = in.chance(128) ? count.as<const int64_t>() : nullptr;
    p.error_flag = in.chance(128) ? flag.as<int32_t>() : nullptr;
    const kdtree_defrag_remap_params* params = in.chance(4) ? nullptr : &p;
    size_t bytes = 777;
    kdtree_status status = kdtree_defrag_remap_workspace_size(params, in.chance(4) ? nullptr : &bytes);
    check_status("kdtree_defrag_remap_workspace_size", status);
    if (status != KDTREE_OK && bytes != 777) finding("kdtree_defrag_remap_workspace_size", "rejected call wrote the size");
    if (g_have_device) return;
    const std::vector<std::pair<const Buffer*, std::vector<uint8_t>>> before = {
        {&table, table.bytes()}, {&flag, flag.bytes()}, {&workspace, workspace.bytes()}};
    status = kdtree_defrag_remap(params, workspace.data(), size_t(in.field(0, 1 << 24, {0})), nullptr);
    check_status("kdtree_defrag_remap", status);
    check_untouched("kdtree_defrag_remap", status, before);
    return;
  }
  if (which == 2) {
    const int32_t dtype = in.field32(KDTREE_DTYPE_INT32, KDTREE_DTYPE_INT64, {KDTREE_DTYPE_F32, 100});
    const int64_t count = in.field(0, 1 << 20, {-1, kI64Max});
    const int64_t num_slots = in.field(1, 1 << 22, {0, -1, (int64_t(1) << 31) + 1, kI64Max});
    size_t bytes = 99;
    kdtree_status status = kdtree_sort_slots_workspace_size(dtype, count, num_slots, in.chance(4) ? nullptr : &bytes);
    check_status("kdtree_sort_slots_workspace_size", status);
    if (status != KDTREE_OK && bytes != 99) finding("kdtree_sort_slots_workspace_size", "rejected call wrote the size");
    if (g_have_device) return;
    Buffer slots = device_array(in), workspace = device_array(in);
    const std::vector<std::pair<const Buffer*, std::vector<uint8_t>>> before = {{&slots, slots.bytes()}};
    status = kdtree_sort_slots(slots.data(), dtype, count, num_slots, workspace.data(),
                               size_t(in.field(0, 1 << 20, {0})), nullptr);
    check_status("kdtree_sort_slots", status);
    check_untouched("kdtree_sort_slots", status, before);
  }
}

// Host planner and statistics over a small pool with real lists.
void fuzz_plan(Input& in, bool stats_only) {
  kdtree_defrag_plan_params p;
  kdtree_defrag_plan_params_init(&p);
  if (in.chance(6)) p.struct_size = uint32_t(in.field(0, sizeof(p) + 8, {}));
  if (in.chance(6)) p.reserved0 = 1;
  p.num_slots = in.field(0, 96, {-1, 0, 1});
  const int64_t pool = std::max<int64_t>(p.num_slots, 0);

  // A random permutation deals slots to requests, the free list, the rest.
  std::vector<int64_t> perm(static_cast<size_t>(pool));
  for (int64_t k = 0; k < pool; ++k) perm[k] = k;
  for (int64_t k = pool - 1; k > 0; --k) std::swap(perm[k], perm[int64_t(in.bits(1)) % (k + 1)]);
  p.num_requests = in.field(0, 6, {-1});
  const int64_t requests = std::max<int64_t>(p.num_requests, 0);
  std::vector<int64_t> indptr(requests + 1, 0), slots, free_list, pinned, reserved;
  indptr[0] = in.chance(16) ? in.field(0, 2, {-1}) : 0;
  for (int64_t k = 0; k < indptr[0]; ++k) slots.push_back(-9);  // ahead of the lists: never read
  size_t next = 0;
  for (int64_t b = 0; b < requests; ++b) {
    const int64_t length = in.field(0, 24, {});
    for (int64_t k = 0; k < length && next < perm.size(); ++k) {
      // Sometimes ascending runs (what the planner aims for), sometimes scattered.
      slots.push_back(perm[next++]);
    }
    indptr[b + 1] = int64_t(slots.size());
  }
  const int64_t free_count = in.field(0, int64_t(perm.size() - next), {});
  for (int64_t k = 0; k < free_count; ++k) free_list.push_back(perm[next++]);
  // Hostile entries: out of range, duplicated, live and free, decreasing indptr.
  if (in.chance(40) && !slots.empty())
    slots[in.bits(1) % slots.size()] = in.chance(128) ? slots[in.bits(1) % slots.size()] : in.field(-2, pool + 2, {kI64Max});
  if (in.chance(30) && !free_list.empty())
    free_list[in.bits(1) % free_list.size()] = in.chance(128) && !slots.empty() ? slots.back() : in.field(-2, pool + 2, {});
  if (in.chance(12) && requests > 0) indptr[in.bits(1) % (requests + 1)] = in.field(-1, int64_t(slots.size()), {});
  const int64_t pinned_count = in.field(0, 4, {-1});
  for (int64_t k = 0; k < std::max<int64_t>(pinned_count, 0); ++k)
    pinned.push_back(slots.empty() || in.chance(16) ? in.field(-1, pool, {}) : slots[in.bits(1) % slots.size()]);
  const int64_t reserved_count = in.field(0, 2, {-1});
  for (int64_t k = 0; k < std::max<int64_t>(reserved_count, 0); ++k) reserved.push_back(in.field(0, 1, {-1, pool}));
  p.budget = in.field(0, 40, {-1, 0});
  const int64_t budget = std::max<int64_t>(p.budget, 0);

  // The lists the params describe: request_slots up to the largest indptr.
  int64_t slot_entries = 0;
  for (int64_t v : indptr) slot_entries = std::max(slot_entries, v);
  slots.resize(size_t(std::max<int64_t>(slot_entries, int64_t(slots.size()))), -9);
  Buffer indptr_buf = buffer_of(indptr), slots_buf = buffer_of(slots), free_buf = buffer_of(free_list),
         pinned_buf = buffer_of(pinned), reserved_buf = buffer_of(reserved);
  p.request_indptr = indptr_buf.as<const int64_t>();
  p.request_slots = slots_buf.as<const int64_t>();
  p.free_slots = free_buf.as<const int64_t>();
  p.num_free = int64_t(free_list.size()) + (in.chance(8) ? in.field(-1, 0, {}) * int64_t(free_list.size() + 1) : 0);
  p.pinned_slots = pinned_buf.as<const int64_t>();
  p.num_pinned = std::min<int64_t>(pinned_count, int64_t(pinned.size()));
  p.reserved_slots = reserved_buf.as<const int64_t>();
  p.num_reserved = std::min<int64_t>(reserved_count, int64_t(reserved.size()));
  if (p.num_pinned < 0 || in.chance(8)) p.num_pinned = pinned_count;

  if (stats_only) {
    const char* fn = "kdtree_fragmentation_stats_compute";
    Buffer runs(size_t(requests) * 8, 0xEE);
    kdtree_fragmentation_stats stats;
    std::memset(&stats, 0xAB, sizeof stats);
    stats.struct_size = in.chance(8) ? uint32_t(in.field(0, 100, {})) : uint32_t(sizeof stats);
    const kdtree_fragmentation_stats stats_before = stats;
    const std::vector<std::pair<const Buffer*, std::vector<uint8_t>>> before = {{&runs, runs.bytes()}};
    const kdtree_status status = kdtree_fragmentation_stats_compute(in.chance(4) ? nullptr : &p,
                                                                    in.chance(128) ? runs.as<int64_t>() : nullptr,
                                                                    in.chance(4) ? nullptr : &stats);
    check_status(fn, status);
    check_untouched(fn, status, before);
    if (status != KDTREE_OK) {
      if (std::memcmp(&stats, &stats_before, sizeof stats) != 0) finding(fn, "a rejected call wrote the stats");
      return;
    }
    int64_t total = 0, runs_total = 0;
    for (int64_t b = 0; b < requests; ++b) {
      total += indptr[b + 1] - indptr[b];
      for (int64_t k = indptr[b]; k < indptr[b + 1]; ++k) runs_total += k == indptr[b] || slots[k] != slots[k - 1] + 1;
    }
    if (stats.total_slots != total || stats.total_runs != runs_total || stats.num_free != p.num_free)
      finding(fn, "statistics differ from a recount");
    return;
  }

  const char* fn = "kdtree_defrag_plan";
  Buffer move_src(size_t(budget) * 8, 0xEE), move_dst(size_t(budget) * 8, 0xEE), count(8, 0xEE);
  p.move_src = move_src.as<int64_t>();
  p.move_dst = move_dst.as<int64_t>();
  p.num_moves = in.chance(4) ? nullptr : count.as<int64_t>();
  const std::vector<std::pair<const Buffer*, std::vector<uint8_t>>> before = {
      {&move_src, move_src.bytes()}, {&move_dst, move_dst.bytes()}, {&count, count.bytes()}};
  const kdtree_status status = kdtree_defrag_plan(in.chance(4) ? nullptr : &p);
  check_status(fn, status);
  check_untouched(fn, status, before);
  if (status != KDTREE_OK) return;

  // Every rule of kdtree_defrag_plan, from the lists as given.
  const int64_t moves = *p.num_moves;
  if (moves < 0 || moves > budget) finding(fn, "num_moves outside [0, budget]");
  std::vector<uint8_t> live(size_t(pool), 0), is_free(size_t(pool), 0), is_pinned(size_t(pool), 0),
      is_reserved(size_t(pool), 0), used_dst(size_t(pool), 0), used_src(size_t(pool), 0);
  for (int64_t k = indptr[0]; k < indptr[requests]; ++k) live[size_t(slots[k])] = 1;
  for (int64_t k = 0; k < p.num_free; ++k) is_free[size_t(free_list[k])] = 1;
  for (int64_t k = 0; k < p.num_pinned; ++k) is_pinned[size_t(pinned[k])] = 1;
  for (int64_t k = 0; k < p.num_reserved; ++k) is_reserved[size_t(reserved[k])] = 1;
  for (int64_t m = 0; m < moves; ++m) {
    const int64_t s = p.move_src[m], t = p.move_dst[m];
    if (s < 0 || s >= pool || t < 0 || t >= pool) finding(fn, "a move outside the pool");
    if (!live[s] || is_pinned[s] || used_src[s]++) finding(fn, "a source not live, pinned or repeated");
    if (!is_free[t] || is_reserved[t] || used_dst[t]++) finding(fn, "a destination not free, reserved or repeated");
  }
}

// ---------------------------------------------------------------------------
// Versions, statuses, struct sizes, devices, params_init
// ---------------------------------------------------------------------------

void fuzz_info(Input& in) {
  const int32_t status_value = int32_t(in.bits(4));
  const char* name = kdtree_status_string(status_value);
  if (name == nullptr || std::strncmp(name, "KDTREE_", 7) != 0) finding("kdtree_status_string", "not a KDTREE_ name");

  std::string struct_name;
  for (uint8_t c = in.byte(); c != 0 && struct_name.size() < 64; c = in.byte()) struct_name.push_back(char(c));
  if (in.chance(32)) struct_name = "kdtree_verify_paged_params";
  size_t size = 5;
  kdtree_status status = kdtree_struct_size(in.chance(8) ? nullptr : struct_name.c_str(), in.chance(8) ? nullptr : &size);
  check_status("kdtree_struct_size", status);

  const int32_t device = int32_t(in.field(-1, 4, {kI32Min, kI32Max}));
  status = kdtree_prepare(device);
  check_status("kdtree_prepare", status);
  int32_t ok = -5;
  status = kdtree_device_supported(device, in.chance(16) ? nullptr : &ok);
  check_status("kdtree_device_supported", status);

  status = kdtree_verify_paged_params_init(nullptr);
  check_status("kdtree_verify_paged_params_init", status);
  if (status != KDTREE_ERROR_INVALID_ARGUMENT) finding("kdtree_verify_paged_params_init", "NULL accepted");
  if (kdtree_merge_params_init(nullptr) != KDTREE_ERROR_INVALID_ARGUMENT ||
      kdtree_defrag_plan_params_init(nullptr) != KDTREE_ERROR_INVALID_ARGUMENT ||
      kdtree_defrag_copy_params_init(nullptr) != KDTREE_ERROR_INVALID_ARGUMENT ||
      kdtree_defrag_remap_params_init(nullptr) != KDTREE_ERROR_INVALID_ARGUMENT ||
      kdtree_verify_contiguous_params_init(nullptr) != KDTREE_ERROR_INVALID_ARGUMENT)
    finding("kdtree_*_params_init", "NULL accepted");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  int32_t ok = 0;
  g_have_device = kdtree_device_supported(0, &ok) != KDTREE_ERROR_NO_DEVICE;
  if (g_have_device) std::fprintf(stderr, "fuzz_entry_points: a GPU is present: device entry points are not called\n");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  switch (in.byte() % 13) {
    case 0: fuzz_verify_host(in); break;
    case 1: fuzz_verify_device(in, 0); break;
    case 2: fuzz_verify_device(in, 1); break;
    case 3: fuzz_verify_device(in, 2); break;
    case 4: fuzz_verify_contiguous(in); break;
    case 5: fuzz_merge_host(in); break;
    case 6: fuzz_merge_device(in); break;
    case 7: fuzz_defrag_device(in, 0); break;
    case 8: fuzz_defrag_device(in, 1); break;
    case 9: fuzz_defrag_device(in, 2); break;
    case 10: fuzz_plan(in, false); break;
    case 11: fuzz_plan(in, true); break;
    default: fuzz_info(in); break;
  }
  return 0;
}
