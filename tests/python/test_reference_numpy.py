"""The CPU references (kdtree_verify_paged_host, kdtree_merge_attention_states_host)
against an independent NumPy float64 implementation of SPEC section 2.

Stands alone: the library is loaded with ctypes from $KDTREE_KERNELS_LIB and
the two params structs are mirrored here (checked against kdtree_struct_size),
so this test does not depend on the bindings package. Inputs are fresh random
draws; each case seeds its own numpy Generator from the case parameters and a
per-run salt, so a failure prints the seed that reproduces it.
"""

import ctypes
import itertools
import os
import zlib

import numpy as np
import pytest

# ---------------------------------------------------------------------------
# Library and struct mirrors
# ---------------------------------------------------------------------------

F32, BF16, F16, FP8, I32, I64 = 0, 1, 2, 3, 4, 5
MASK_NONE, MASK_CAUSAL, MASK_TREE_DENSE, MASK_TREE_BITS, MASK_SGLANG_FULL = range(5)
TAIL_FROM_INDICES, TAIL_FROM_EXTEND = 0, 1
FLAG_SLOT_OUT_OF_RANGE, FLAG_KV_SHORTER_THAN_Q, FLAG_BAD_INDPTR = 1, 2, 4
D_L, D_R = 512, 64
D = D_L + D_R

vp = ctypes.c_void_p


class VerifyPagedParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32), ("batch_size", ctypes.c_int32),
        ("num_heads", ctypes.c_int32), ("head_dim_latent", ctypes.c_int32),
        ("head_dim_rope", ctypes.c_int32), ("max_q_len", ctypes.c_int32),
        ("total_q", ctypes.c_int64), ("max_kv_len", ctypes.c_int64),
        ("num_splits", ctypes.c_int32), ("sm_scale", ctypes.c_float),
        ("q", vp), ("q_dtype", ctypes.c_int32), ("reserved0", ctypes.c_int32),
        ("q_stride_token", ctypes.c_int64), ("q_stride_head", ctypes.c_int64),
        ("kv_cache", vp), ("kv_dtype", ctypes.c_int32), ("kv_scale", ctypes.c_float),
        ("kv_stride_slot", ctypes.c_int64), ("num_slots", ctypes.c_int64),
        ("qo_indptr", vp), ("kv_indptr", vp), ("kv_indices", vp),
        ("index_dtype", ctypes.c_int32), ("tail_source", ctypes.c_int32),
        ("tail_kv", vp), ("tail_kv_stride", ctypes.c_int64),
        ("mask_kind", ctypes.c_int32), ("reserved1", ctypes.c_int32),
        ("mask", vp), ("mask_indptr", vp), ("mask_row_bytes", ctypes.c_int64),
        ("out", vp), ("out_dtype", ctypes.c_int32), ("reserved2", ctypes.c_int32),
        ("out_stride_token", ctypes.c_int64), ("out_stride_head", ctypes.c_int64),
        ("lse", vp), ("error_flag", vp),
    ]


class MergeParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32), ("num_states", ctypes.c_int32),
        ("num_tokens", ctypes.c_int64), ("num_heads", ctypes.c_int32),
        ("head_dim", ctypes.c_int32), ("states", vp),
        ("states_dtype", ctypes.c_int32), ("reserved0", ctypes.c_int32),
        ("states_stride_state", ctypes.c_int64), ("states_stride_token", ctypes.c_int64),
        ("states_stride_head", ctypes.c_int64), ("states_lse", vp),
        ("out", vp), ("out_dtype", ctypes.c_int32), ("reserved1", ctypes.c_int32),
        ("out_stride_token", ctypes.c_int64), ("out_stride_head", ctypes.c_int64),
        ("lse", vp),
    ]


@pytest.fixture(scope="module")
def lib():
    path = os.environ.get("KDTREE_KERNELS_LIB")
    if not path:
        pytest.skip("KDTREE_KERNELS_LIB is not set")
    handle = ctypes.CDLL(path)
    for name in ("kdtree_verify_paged_params_init", "kdtree_verify_paged_host",
                 "kdtree_merge_params_init", "kdtree_merge_attention_states_host"):
        getattr(handle, name).restype = ctypes.c_int32
    handle.kdtree_struct_size.restype = ctypes.c_int32
    handle.kdtree_struct_size.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t)]
    for mirror in (VerifyPagedParams, MergeParams):
        size = ctypes.c_size_t()
        c_name = {VerifyPagedParams: b"kdtree_verify_paged_params",
                  MergeParams: b"kdtree_merge_params"}[mirror]
        assert handle.kdtree_struct_size(c_name, ctypes.byref(size)) == 0
        assert size.value == ctypes.sizeof(mirror), c_name
    return handle


def message(lib):
    fn = getattr(lib, "kdtree_last_error_message", None)
    if fn is None:
        return ""
    fn.restype = ctypes.c_char_p
    return (fn() or b"").decode()


def case_rng(*key):
    """A generator seeded from the case and a per-run salt (printed on failure)."""
    salt = int(os.environ.get("KDTREE_TEST_SEED", np.random.SeedSequence().entropy % 2**32))
    seed = (zlib.crc32(repr(key).encode()) ^ salt) & 0xFFFFFFFF
    return np.random.default_rng(seed), seed


# ---------------------------------------------------------------------------
# dtype encodings, written independently of the library's C++ ones
# ---------------------------------------------------------------------------

def aligned(shape, dtype, align=256):
    """An uninitialised array whose data is `align`-byte aligned (the API checks 16 B)."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape)) if len(shape) else 1
    raw = np.empty(count * dtype.itemsize + align, np.uint8)
    offset = (-raw.ctypes.data) % align
    return raw[offset:offset + count * dtype.itemsize].view(dtype).reshape(shape)


def bf16_encode(x):
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_decode(h):
    return (h.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def fp8_table():
    """Value of each e4m3fn byte (NaN for 0x7f / 0xff)."""
    b = np.arange(256)
    exp, man = (b >> 3) & 0xF, b & 0x7
    val = np.where(exp == 0, man / 8.0 * 2.0 ** -6, (1 + man / 8.0) * 2.0 ** (exp - 7.0))
    val = np.where((b & 0x7F) == 0x7F, np.nan, val)
    return np.where(b & 0x80, -val, val)


FP8_VALUES = fp8_table()


def fp8_encode(x):
    """Nearest finite e4m3fn byte (ties are irrelevant here: inputs are random)."""
    finite = np.flatnonzero(~np.isnan(FP8_VALUES))
    nearest = np.abs(x.reshape(-1, 1) - FP8_VALUES[finite].reshape(1, -1)).argmin(axis=1)
    return finite[nearest].astype(np.uint8).reshape(x.shape)


def encode(x, dtype):
    if dtype == BF16:
        return bf16_encode(x)
    if dtype == F16:
        return x.astype(np.float16)
    if dtype == F32:
        return x.astype(np.float32)
    return fp8_encode(x)


def decode(a, dtype, kv_scale=1.0):
    if dtype == BF16:
        return bf16_decode(a)
    if dtype in (F16, F32):
        return a.astype(np.float64)
    return FP8_VALUES[a] * np.float64(np.float32(kv_scale))


STORAGE = {F32: np.float32, BF16: np.uint16, F16: np.float16, FP8: np.uint8}


def to_device_layout(values, dtype):
    """Encoded values in an aligned buffer of the storage type."""
    enc = encode(values, dtype)
    buf = aligned(enc.shape, STORAGE[dtype])
    buf[...] = enc.view(STORAGE[dtype]) if dtype == BF16 else enc
    return buf


# ---------------------------------------------------------------------------
# Random verify problems
# ---------------------------------------------------------------------------

def random_tree_visibility(rng, q_len):
    """visible[i, j]: j is i or an ancestor of i; each draft's parent is earlier."""
    parent = np.array([-1] + [int(rng.integers(-1, i)) for i in range(1, q_len)])
    visible = np.zeros((q_len, q_len), bool)
    for i in range(q_len):
        j = i
        while j >= 0:
            visible[i, j] = True
            j = parent[j]
    return visible


class Problem:
    """Host arrays of one kdtree_verify_paged call plus what NumPy needs to check it."""

    def __init__(self, rng, *, q_lens, prefixes, num_heads, mask_kind=MASK_NONE,
                 tail_source=TAIL_FROM_INDICES, index_dtype=I32, kv_dtype=BF16,
                 q_dtype=BF16, out_dtype=F32, kv_scale=1.0, extra_rows=0, trees=None,
                 max_q_len=None, ones_values=False):
        self.q_lens, self.prefixes = list(q_lens), list(prefixes)
        self.B, self.H = len(q_lens), num_heads
        self.mask_kind, self.tail_source = mask_kind, tail_source
        self.index_dtype, self.kv_dtype, self.q_dtype, self.out_dtype = index_dtype, kv_dtype, q_dtype, out_dtype
        self.kv_scale = np.float32(kv_scale if kv_dtype == FP8 else 1.0)
        self.max_q_len = max_q_len or max([1] + self.q_lens)
        self.qo_indptr = aligned((self.B + 1,), np.int32)
        self.qo_indptr[0] = 0
        self.qo_indptr[1:] = np.cumsum(self.q_lens)
        self.total_q = int(self.qo_indptr[-1]) + extra_rows
        self.sm_scale = np.float32(1.0 / np.sqrt(D) * rng.uniform(0.5, 2.0))

        from_indices = tail_source == TAIL_FROM_INDICES
        kv_lens = [p + (q if from_indices else 0) for p, q in zip(self.prefixes, self.q_lens)]
        self.kv_indptr = aligned((self.B + 1,), np.int32)
        self.kv_indptr[0] = 0
        self.kv_indptr[1:] = np.cumsum(kv_lens)
        used = int(self.kv_indptr[-1])
        self.num_slots = used + int(rng.integers(1, 40))
        slots = rng.permutation(self.num_slots)[:used]
        self.kv_indices = aligned((used,), np.int64 if index_dtype == I64 else np.int32)
        self.kv_indices[...] = slots

        # fp8 values are drawn on the fp8 grid / kv_scale so scaled keys stay O(1).
        scale = 1.0 / float(self.kv_scale)
        kv_values = rng.standard_normal((self.num_slots, D)) * scale
        tail_values = rng.standard_normal((max(self.total_q, 1), D)) * scale
        if ones_values:
            kv_values[:, :D_L] = scale
            tail_values[:, :D_L] = scale
        self.kv_cache = to_device_layout(kv_values, kv_dtype)
        self.tail_kv = to_device_layout(tail_values, kv_dtype)
        self.q = to_device_layout(rng.standard_normal((max(self.total_q, 1), self.H, D)), q_dtype)

        self.trees = trees or [random_tree_visibility(rng, q) for q in self.q_lens]
        self.build_mask()
        self.out = aligned((max(self.total_q, 1), self.H, D_L), STORAGE[out_dtype])
        self.lse = aligned((max(self.total_q, 1), self.H), np.float32)
        self.error_flag = aligned((1,), np.int32)
        self.reset_outputs()

    def reset_outputs(self):
        """Sentinels: rows the call must not touch keep them."""
        self.out.view(np.uint8)[...] = 0x5A
        self.lse[...] = 12345.0
        self.error_flag[0] = 0

    def visibility(self, b):
        q = self.q_lens[b]
        if self.mask_kind == MASK_NONE:
            return np.ones((q, q), bool)
        if self.mask_kind == MASK_CAUSAL:
            return np.tril(np.ones((q, q), bool))
        return self.trees[b]

    def build_mask(self):
        rows = []
        self.mask_row_bytes = (self.max_q_len + 7) // 8
        for b, q in enumerate(self.q_lens):
            vis = self.trees[b]
            if self.mask_kind == MASK_TREE_DENSE:
                rows.append(vis.astype(np.uint8).reshape(-1))
            elif self.mask_kind == MASK_TREE_BITS:
                bits = np.zeros((q, self.mask_row_bytes), np.uint8)
                for j in range(q):
                    bits[:, j // 8] |= (vis[:, j].astype(np.uint8) << (j % 8))
                rows.append(bits.reshape(-1))
            elif self.mask_kind == MASK_SGLANG_FULL:
                # Prefix columns hold 0: were they read, the prefix would vanish.
                full = np.zeros((q, self.prefixes[b] + q), np.uint8)
                full[:, self.prefixes[b]:] = vis
                rows.append(full.reshape(-1))
            else:
                rows.append(np.zeros(0, np.uint8))
        self.mask_indptr = aligned((self.B + 1,), np.int64)
        self.mask_indptr[0] = 0
        self.mask_indptr[1:] = np.cumsum([len(r) for r in rows])
        self.mask = aligned((max(1, int(self.mask_indptr[-1])),), np.uint8)
        if rows and self.mask_indptr[-1]:
            self.mask[:int(self.mask_indptr[-1])] = np.concatenate(rows)

    def params(self, lib):
        p = VerifyPagedParams()
        assert lib.kdtree_verify_paged_params_init(ctypes.byref(p)) == 0
        p.batch_size, p.num_heads = self.B, self.H
        p.max_q_len, p.total_q = self.max_q_len, self.total_q
        p.max_kv_len = max([1] + [pre + q for pre, q in zip(self.prefixes, self.q_lens)])
        p.num_splits, p.sm_scale = 1, float(self.sm_scale)
        p.q, p.q_dtype = self.q.ctypes.data, self.q_dtype
        p.q_stride_token, p.q_stride_head = self.H * D, D
        p.kv_cache, p.kv_dtype, p.kv_scale = self.kv_cache.ctypes.data, self.kv_dtype, float(self.kv_scale)
        p.kv_stride_slot, p.num_slots = D, self.num_slots
        p.qo_indptr, p.kv_indptr = self.qo_indptr.ctypes.data, self.kv_indptr.ctypes.data
        p.kv_indices = self.kv_indices.ctypes.data if self.kv_indices.size else self.qo_indptr.ctypes.data
        p.index_dtype, p.tail_source = self.index_dtype, self.tail_source
        p.tail_kv, p.tail_kv_stride = self.tail_kv.ctypes.data, D
        p.mask_kind = self.mask_kind
        p.mask, p.mask_indptr = self.mask.ctypes.data, self.mask_indptr.ctypes.data
        p.mask_row_bytes = self.mask_row_bytes
        p.out, p.out_dtype = self.out.ctypes.data, self.out_dtype
        p.out_stride_token, p.out_stride_head = self.H * D_L, D_L
        p.lse, p.error_flag = self.lse.ctypes.data, self.error_flag.ctypes.data
        return p

    def run(self, lib, **overrides):
        self.reset_outputs()
        p = self.params(lib)
        for name, value in overrides.items():
            setattr(p, name, value)
        status = lib.kdtree_verify_paged_host(ctypes.byref(p))
        assert status == 0, message(lib)
        return self.out.copy(), self.lse.copy(), int(self.error_flag[0])

    def numpy_reference(self):
        """float64 out [total_q, H, D_L] and lse [total_q, H] (NaN rows: not in a request)."""
        out = np.full((max(self.total_q, 1), self.H, D_L), np.nan)
        lse = np.full((max(self.total_q, 1), self.H), np.nan)
        kv = decode(self.kv_cache, self.kv_dtype, self.kv_scale)
        tail = decode(self.tail_kv, self.kv_dtype, self.kv_scale)
        q_all = decode(self.q, self.q_dtype)
        for b in range(self.B):
            t0, q = int(self.qo_indptr[b]), self.q_lens[b]
            if q == 0:
                continue
            idx = self.kv_indices[self.kv_indptr[b]:self.kv_indptr[b + 1]].astype(np.int64)
            if self.tail_source == TAIL_FROM_INDICES and len(idx) < q:  # SPEC: kv shorter than q
                out[t0:t0 + q], lse[t0:t0 + q] = 0.0, -np.inf
                continue
            valid = (idx >= 0) & (idx < self.num_slots)
            keys = np.zeros((len(idx), D))
            keys[valid] = kv[idx[valid]]
            if self.tail_source == TAIL_FROM_EXTEND:
                keys = np.concatenate([keys, tail[t0:t0 + q]])
                valid = np.concatenate([valid, np.ones(q, bool)])
            prefix = self.prefixes[b]
            vis = np.ones((q, len(keys)), bool)
            vis[:, prefix:] = self.visibility(b)
            vis &= valid[None, :]
            s = np.einsum("ihd,jd->ihj", q_all[t0:t0 + q], keys) * np.float64(self.sm_scale)
            s = np.where(vis[:, None, :], s, -np.inf)
            m = s.max(axis=2, keepdims=True)
            m_safe = np.where(np.isfinite(m), m, 0.0)
            p = np.exp(s - m_safe)
            l = p.sum(axis=2)
            with np.errstate(divide="ignore", invalid="ignore"):
                o = np.einsum("ihj,jd->ihd", p, keys[:, :D_L]) / l[..., None]
                lse[t0:t0 + q] = np.where(l > 0, m[..., 0] + np.log(l), -np.inf)
            out[t0:t0 + q] = np.where(l[..., None] > 0, o, 0.0)
        return out, lse


def out_as_float(problem, out):
    if problem.out_dtype == BF16:
        return bf16_decode(out)
    return out.astype(np.float64)


def assert_close(problem, out, lse, ref_out, ref_lse, rtol):
    rows = ~np.isnan(ref_lse)
    got = out_as_float(problem, out)[rows]
    want = ref_out[rows]
    # Row-wise max-norm error relative to the row's largest value: out is a
    # weighted mean of keys, so single elements may cancel to ~0.
    err = np.abs(got - want).max(axis=-1)
    scale = np.abs(want).max(axis=-1)
    assert np.all(err <= rtol * np.maximum(scale, 1e-30)), (err / np.maximum(scale, 1e-30)).max()
    g, w = lse[rows], ref_lse[rows]
    finite = np.isfinite(w)
    assert np.array_equal(np.isinf(g), ~finite)
    assert np.all(np.abs(g[finite] - w[finite]) <= 1e-6 * np.maximum(1.0, np.abs(w[finite])))


# ---------------------------------------------------------------------------
# Verify: the grid against NumPy
# ---------------------------------------------------------------------------

GRID = list(itertools.product(
    [MASK_NONE, MASK_CAUSAL, MASK_TREE_DENSE, MASK_TREE_BITS, MASK_SGLANG_FULL],
    [TAIL_FROM_INDICES, TAIL_FROM_EXTEND],
    [I32, I64],
    [BF16, F16, FP8],
))


@pytest.mark.parametrize("mask_kind,tail_source,index_dtype,kv_dtype", GRID)
def test_verify_host_matches_numpy(lib, mask_kind, tail_source, index_dtype, kv_dtype):
    rng, seed = case_rng("grid", mask_kind, tail_source, index_dtype, kv_dtype)
    batch = int(rng.integers(1, 4))
    problem = Problem(
        rng,
        q_lens=rng.integers(1, 17, batch).tolist(),
        prefixes=rng.integers(0, 301, batch).tolist(),
        num_heads=int(rng.choice([1, 2, 16])),
        mask_kind=mask_kind, tail_source=tail_source, index_dtype=index_dtype,
        kv_dtype=kv_dtype, q_dtype=F16 if kv_dtype == F16 else BF16,
        kv_scale=float(rng.uniform(0.01, 0.1)), extra_rows=int(rng.integers(0, 3)))
    out, lse, flag = problem.run(lib)
    ref_out, ref_lse = problem.numpy_reference()
    assert flag == 0, seed
    assert_close(problem, out, lse, ref_out, ref_lse, 1e-6)
    # Rows not in any request are untouched.
    pad = slice(int(problem.qo_indptr[-1]), problem.total_q)
    assert np.all(problem.out.view(np.uint8).reshape(problem.out.shape[0], -1)[pad] == 0x5A)
    assert np.all(lse[pad] == 12345.0)


@pytest.mark.parametrize("out_dtype", [BF16, F16, F32])
def test_output_dtypes(lib, out_dtype):
    rng, seed = case_rng("out", out_dtype)
    problem = Problem(rng, q_lens=[5, 3], prefixes=[40, 0], num_heads=2,
                      mask_kind=MASK_CAUSAL, out_dtype=out_dtype)
    out, lse, flag = problem.run(lib)
    ref_out, ref_lse = problem.numpy_reference()
    # One rounding to the output type (bf16 / f16: 2^-8 / 2^-11 relative).
    assert_close(problem, out, lse, ref_out, ref_lse, {BF16: 4e-3, F16: 5e-4, F32: 1e-6}[out_dtype])
    assert flag == 0, seed


def test_empty_prefix_and_zero_length_requests(lib):
    rng, _ = case_rng("empty")
    problem = Problem(rng, q_lens=[0, 4, 0, 1], prefixes=[7, 0, 0, 0], num_heads=1,
                      mask_kind=MASK_TREE_DENSE)
    out, lse, flag = problem.run(lib)
    ref_out, ref_lse = problem.numpy_reference()
    assert_close(problem, out, lse, ref_out, ref_lse, 1e-6)
    assert flag == 0


def test_sglang_dummy_requests(lib):
    """SGLang pads batches with requests of kv length 1 (slot 0) and q_len 1."""
    rng, _ = case_rng("dummy")
    problem = Problem(rng, q_lens=[6, 1, 1], prefixes=[30, 1, 1], num_heads=16,
                      mask_kind=MASK_SGLANG_FULL, tail_source=TAIL_FROM_EXTEND)
    problem.kv_indices[problem.kv_indptr[1]:] = 0
    out, lse, flag = problem.run(lib)
    ref_out, ref_lse = problem.numpy_reference()
    assert_close(problem, out, lse, ref_out, ref_lse, 1e-6)
    assert flag == 0


def test_zero_batch_is_noop(lib):
    rng, _ = case_rng("zero")
    problem = Problem(rng, q_lens=[3], prefixes=[5], num_heads=1)
    out, lse, flag = problem.run(lib, batch_size=0)
    assert np.all(out.view(np.uint8) == 0x5A) and np.all(lse == 12345.0) and flag == 0


# ---------------------------------------------------------------------------
# Flags: bad slots, short kv, bad indptr
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("index_dtype", [I32, I64])
def test_out_of_range_slots_are_flagged_and_invisible(lib, index_dtype):
    rng, _ = case_rng("oob", index_dtype)
    problem = Problem(rng, q_lens=[4, 2], prefixes=[50, 20], num_heads=2,
                      mask_kind=MASK_CAUSAL, index_dtype=index_dtype)
    problem.kv_indices[3] = problem.num_slots       # just past the end
    problem.kv_indices[problem.kv_indptr[1] + 1] = -1
    if index_dtype == I64:
        problem.kv_indices[10] = 2**40
    out, lse, flag = problem.run(lib)
    ref_out, ref_lse = problem.numpy_reference()
    assert flag == FLAG_SLOT_OUT_OF_RANGE
    assert_close(problem, out, lse, ref_out, ref_lse, 1e-6)


def test_kv_shorter_than_q(lib):
    rng, _ = case_rng("short")
    problem = Problem(rng, q_lens=[4, 3], prefixes=[10, 0], num_heads=2)
    problem.kv_indptr[2] = problem.kv_indptr[1] + 2  # request 1: 2 keys for 3 rows
    out, lse, flag = problem.run(lib)
    assert flag == FLAG_KV_SHORTER_THAN_Q
    rows = slice(int(problem.qo_indptr[1]), int(problem.qo_indptr[2]))
    assert np.all(out[rows] == 0) and np.all(np.isneginf(lse[rows]))
    ref_out, ref_lse = problem.numpy_reference()
    assert_close(problem, out, lse, ref_out, ref_lse, 1e-6)


def test_bad_indptr_skips_request(lib):
    rng, _ = case_rng("badindptr")
    problem = Problem(rng, q_lens=[3, 9], prefixes=[10, 10], num_heads=1, max_q_len=8)
    out, lse, flag = problem.run(lib)
    assert flag == FLAG_BAD_INDPTR
    assert np.all(out[3:].view(np.uint8) == 0x5A) and np.all(lse[3:] == 12345.0)
    ref_out, ref_lse = problem.numpy_reference()
    assert_close(problem, out[:3], lse[:3], ref_out[:3], ref_lse[:3], 1e-6)


def test_kv_range_past_indices_is_bad_indptr(lib):
    # Found by the fuzzer (ASan heap-buffer-overflow): kv_indptr[1] past
    # kv_indptr[B] made request 0 read beyond kv_indices.
    rng, _ = case_rng("kvpastend")
    problem = Problem(rng, q_lens=[2, 2, 2], prefixes=[10, 10, 10], num_heads=1)
    ref_out, ref_lse = problem.numpy_reference()
    problem.kv_indptr[1] = int(problem.kv_indptr[-1]) + 4
    out, lse, flag = problem.run(lib)
    assert flag == FLAG_BAD_INDPTR
    assert np.all(out[:4].view(np.uint8) == 0x5A) and np.all(lse[:4] == 12345.0)
    assert_close(problem, out[4:], lse[4:], ref_out[4:], ref_lse[4:], 1e-6)


@pytest.mark.parametrize("mask_kind", [MASK_TREE_DENSE, MASK_SGLANG_FULL])
def test_mask_offset_past_mask_is_bad_indptr(lib, mask_kind):
    # Found in review: a request's mask bytes past mask_indptr[B] (or before 0)
    # were read; such a request is now skipped and flagged.
    rng, _ = case_rng("maskpastend", mask_kind)
    q_lens = [3, 4, 2]
    trees = [random_tree_visibility(rng, q) for q in q_lens]
    problem = Problem(rng, q_lens=q_lens, prefixes=[5, 6, 7], num_heads=1, mask_kind=mask_kind, trees=trees)
    ref_out, ref_lse = problem.numpy_reference()
    problem.mask_indptr[0] = int(problem.mask_indptr[-1]) - 1  # request 0's bytes run past the end
    out, lse, flag = problem.run(lib)
    assert flag == FLAG_BAD_INDPTR
    assert np.all(out[:3].view(np.uint8) == 0x5A) and np.all(lse[:3] == 12345.0)
    assert_close(problem, out[3:], lse[3:], ref_out[3:], ref_lse[3:], 1e-6)


# ---------------------------------------------------------------------------
# Exact (bitwise) cases
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("tail_source", [TAIL_FROM_INDICES, TAIL_FROM_EXTEND])
def test_tree_encodings_agree_bitwise(lib, tail_source):
    rng, _ = case_rng("encodings", tail_source)
    q_lens, prefixes = [16, 7, 11], [100, 0, 33]
    trees = [random_tree_visibility(rng, q) for q in q_lens]
    results = []
    for kind in (MASK_TREE_DENSE, MASK_TREE_BITS, MASK_SGLANG_FULL):
        problem = Problem(np.random.default_rng(7), q_lens=q_lens, prefixes=prefixes, num_heads=2,
                          mask_kind=kind, tail_source=tail_source, trees=trees)
        results.append(problem.run(lib))
    for out, lse, _ in results[1:]:
        assert np.array_equal(out.view(np.uint8), results[0][0].view(np.uint8))
        assert np.array_equal(lse.view(np.uint32), results[0][1].view(np.uint32))


def test_dense_causal_equals_causal_bitwise(lib):
    q_lens, prefixes = [16, 5], [64, 3]
    causal = [np.tril(np.ones((q, q), bool)) for q in q_lens]
    dense = Problem(np.random.default_rng(3), q_lens=q_lens, prefixes=prefixes, num_heads=16,
                    mask_kind=MASK_TREE_DENSE, trees=causal).run(lib)
    plain = Problem(np.random.default_rng(3), q_lens=q_lens, prefixes=prefixes, num_heads=16,
                    mask_kind=MASK_CAUSAL, trees=causal).run(lib)
    assert np.array_equal(dense[0], plain[0]) and np.array_equal(dense[1], plain[1])


@pytest.mark.parametrize("kv_dtype", [BF16, F16, FP8])
def test_all_ones_values_give_exactly_one(lib, kv_dtype):
    rng, _ = case_rng("ones", kv_dtype)
    problem = Problem(rng, q_lens=[8, 3], prefixes=[200, 17], num_heads=2, mask_kind=MASK_TREE_BITS,
                      kv_dtype=kv_dtype, q_dtype=F16 if kv_dtype == F16 else BF16,
                      kv_scale=1.0, ones_values=True)
    out, lse, _ = problem.run(lib)
    assert np.all(out[:11] == 1.0)


# ---------------------------------------------------------------------------
# Merge
# ---------------------------------------------------------------------------

def numpy_merge(states, lse):
    """states [S, T, H, d] float64, lse [S, T, H] -> out [T, H, d], lse [T, H]."""
    m = lse.max(axis=0)
    m_safe = np.where(np.isfinite(m), m, 0.0)
    w = np.exp(lse - m_safe)
    total = w.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        merged_lse = np.where(total > 0, m + np.log(total), -np.inf)
        weight = np.where(total > 0, w / total, 0.0)
    contrib = np.where(weight[..., None] > 0, weight[..., None] * np.nan_to_num(states), 0.0)
    return contrib.sum(axis=0), merged_lse


@pytest.mark.parametrize("states_dtype,out_dtype", [(F32, F32), (BF16, F32), (F16, F32), (F32, BF16), (BF16, F16)])
def test_merge_host_matches_numpy(lib, states_dtype, out_dtype):
    rng, seed = case_rng("merge", states_dtype, out_dtype)
    S, T, H, d = int(rng.integers(1, 6)), int(rng.integers(1, 9)), int(rng.choice([1, 3, 16])), int(rng.choice([8, 64, 512]))
    values = rng.standard_normal((S, T, H, d))
    states = to_device_layout(values, states_dtype)
    lse = aligned((S, T, H), np.float32)
    lse[...] = rng.uniform(-5, 5, (S, T, H))
    lse[rng.random((S, T, H)) < 0.2] = -np.inf
    lse[:, 0, 0] = -np.inf  # one row with nothing visible
    if states_dtype == F32:
        states[lse == -np.inf] = np.nan  # an empty state's out is never read
    out = aligned((T, H, d), STORAGE[out_dtype])
    out_lse = aligned((T, H), np.float32)

    p = MergeParams()
    assert lib.kdtree_merge_params_init(ctypes.byref(p)) == 0
    p.num_states, p.num_tokens, p.num_heads, p.head_dim = S, T, H, d
    p.states, p.states_dtype = states.ctypes.data, states_dtype
    p.states_stride_state, p.states_stride_token, p.states_stride_head = T * H * d, H * d, d
    p.states_lse = lse.ctypes.data
    p.out, p.out_dtype, p.out_stride_token, p.out_stride_head = out.ctypes.data, out_dtype, H * d, d
    p.lse = out_lse.ctypes.data
    assert lib.kdtree_merge_attention_states_host(ctypes.byref(p)) == 0, message(lib)

    decoded = np.where(np.isfinite(lse)[..., None], decode(states, states_dtype), np.nan)
    want_out, want_lse = numpy_merge(decoded, lse.astype(np.float64))
    got = bf16_decode(out) if out_dtype == BF16 else out.astype(np.float64)
    rtol = {F32: 1e-6, BF16: 4e-3, F16: 5e-4}[out_dtype]
    err = np.abs(got - want_out).max(axis=-1)
    assert np.all(err <= rtol * np.maximum(np.abs(want_out).max(axis=-1), 1e-30)), seed
    assert np.all(got[0, 0] == 0) and np.isneginf(out_lse[0, 0])
    finite = np.isfinite(want_lse)
    assert np.array_equal(np.isfinite(out_lse), finite)
    assert np.allclose(out_lse[finite], want_lse[finite], rtol=1e-6, atol=1e-6)
