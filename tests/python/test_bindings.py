"""The Python bindings against the real library, on the CPU.

Run with KDTREE_KERNELS_LIB pointing at the built library and bindings/python
on PYTHONPATH (CI does both).
"""

import ctypes
import math
import os
import pathlib
import re

import numpy as np
import pytest

import kdtree_kernels as kk

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HEADER = os.path.join(REPO, "include", "kdtree_kernels.h")
D, DL = 576, 512


def header_constants():
    """#define and enum constants of the public header, parsed from its text."""
    text = open(HEADER).read()
    values = {}
    for name, value in re.findall(r"#define (KDTREE_\w+) (\d+)\s*$", text, re.M):
        values[name] = int(value)
    for name, value in re.findall(r"^\s*(KDTREE_\w+) = (\d+)", text, re.M):
        values[name] = int(value)
    values["KDTREE_VERSION_STRING"] = re.search(
        r'#define KDTREE_VERSION_STRING "([^"]+)"', text).group(1)
    return values


def device_present():
    try:
        kk.device_supported(0)
        return True
    except kk.NoDeviceError:
        return False


# --------------------------------------------------------------------------
# Versions, constants, structs, statuses
# --------------------------------------------------------------------------

def test_versions_agree_with_header():
    h = header_constants()
    number = (h["KDTREE_VERSION_MAJOR"] * 10000 + h["KDTREE_VERSION_MINOR"] * 100
              + h["KDTREE_VERSION_PATCH"])
    assert kk.version_number() == number == kk.VERSION_NUMBER
    assert kk.version() == h["KDTREE_VERSION_STRING"] == kk.VERSION_STRING == kk.__version__
    assert kk.abi_version() == h["KDTREE_ABI_VERSION"] == kk.ABI_VERSION
    assert kk.build_info().startswith("kdtree_kernels " + kk.version())


def test_load_library_gives_a_checked_handle_of_its_own(tmp_path):
    # A copy of the library under another name is a second, independent build
    # as far as the loader is concerned (what bench.py --compare-lib relies on).
    other = tmp_path / "libkdtree_kernels_c_copy.so"
    other.write_bytes(pathlib.Path(kk.lib.path).read_bytes())
    handle = kk.load_library(str(other))
    assert handle.path == str(other) and handle is not kk.lib
    assert handle.kdtree_abi_version() == kk.abi_version()
    assert handle.kdtree_build_info().decode() == kk.build_info()
    # The copy is a separate library: its error message is its own.
    size = ctypes.c_size_t(0)
    with pytest.raises(kk.InvalidArgumentError, match="kdtree_first_name"):
        kk.lib.kdtree_struct_size(b"kdtree_first_name", ctypes.byref(size))
    with pytest.raises(kk.InvalidArgumentError, match="kdtree_second_name"):
        handle.kdtree_struct_size(b"kdtree_second_name", ctypes.byref(size))
    assert "kdtree_second_name" in handle.last_error_message()
    assert "kdtree_first_name" in kk.lib.last_error_message()
    with pytest.raises(ImportError, match="cannot load"):
        kk.load_library(str(tmp_path / "missing.so"))


def test_constants_mirror_header():
    h = header_constants()
    mirrored = {k[len("KDTREE_"):]: v for k, v in h.items()
                if k.startswith(("KDTREE_OK", "KDTREE_ERROR_", "KDTREE_FLAG_", "KDTREE_DTYPE_",
                                 "KDTREE_MASK_", "KDTREE_TAIL_"))}
    assert len(mirrored) == 10 + 3 + 6 + 5 + 2
    for name, value in mirrored.items():
        assert getattr(kk, name) == value, name


@pytest.mark.parametrize("c_name", sorted(kk.STRUCTS))
def test_struct_sizes_match_library(c_name):
    assert kk.struct_size(c_name) == ctypes.sizeof(kk.STRUCTS[c_name])


def test_unknown_struct_name_is_invalid_argument():
    with pytest.raises(kk.InvalidArgumentError) as e:
        kk.struct_size("kdtree_no_such_struct")
    assert "kdtree_no_such_struct" in str(e.value) or "struct_name" in str(e.value)


def test_status_strings():
    for status, cls in kk.ERROR_CLASSES.items():
        snake = re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__[:-len("Error")]).upper()
        assert kk.status_string(status) == "KDTREE_ERROR_" + snake
        assert kk.errors.status_name(status) == kk.status_string(status)
    assert kk.status_string(kk.OK) == "KDTREE_OK"
    assert kk.status_string(12345) == "KDTREE_STATUS_UNKNOWN"


def test_every_function_of_the_header_is_declared():
    text = open(HEADER).read()
    declared = set(re.findall(r"KDTREE_API [^;(]*?\b(kdtree_\w+)\(", text))
    assert declared == {f.name for f in kk.exported_functions}
    for name in declared:
        assert callable(getattr(kk.lib, name))


# --------------------------------------------------------------------------
# Errors carry the library's message
# --------------------------------------------------------------------------

def host_params():
    p = kk.VerifyPagedParams()
    kk.lib.kdtree_verify_paged_params_init(ctypes.byref(p))
    return p


def test_null_pointer_is_invalid_argument_with_message():
    p = host_params()
    p.batch_size, p.num_heads, p.max_q_len, p.total_q = 1, 1, 1, 1
    with pytest.raises(kk.InvalidArgumentError) as e:
        kk.lib.kdtree_verify_paged_host(ctypes.byref(p))
    assert e.value.status == kk.ERROR_INVALID_ARGUMENT
    assert e.value.message.startswith("kdtree_verify_paged_host")
    assert "NULL" in e.value.message
    # The exception carries exactly what the library says.
    assert e.value.message == kk.last_error_message()


def test_negative_batch_size_names_the_argument():
    p = host_params()
    p.batch_size = -1
    with pytest.raises(kk.InvalidArgumentError) as e:
        kk.lib.kdtree_verify_paged_host(ctypes.byref(p))
    assert "batch_size" in e.value.message


def small_case(rng, q_lens, prefixes, heads, tail_from_extend=False, index_dtype=np.int32):
    """Random float16 inputs of a small paged batch (a fragmented slot pool)."""
    total_q = sum(q_lens)
    kv_lens = [p + (0 if tail_from_extend else q) for p, q in zip(prefixes, q_lens)]
    num_slots = sum(kv_lens) + 7
    kv = (rng.standard_normal((num_slots, D)) * 0.5).astype(np.float16)
    q = (rng.standard_normal((total_q, heads, D)) * 0.5).astype(np.float16)
    slots = rng.permutation(num_slots)[:sum(kv_lens)].astype(index_dtype)
    qo = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    kvp = np.concatenate([[0], np.cumsum(kv_lens)]).astype(np.int32)
    tail = (rng.standard_normal((total_q, D)) * 0.5).astype(np.float16)
    return q, kv, qo, kvp, slots, tail


def random_tree(rng, n):
    """Ancestor mask of a random tree: node i's parent is an earlier node."""
    m = np.zeros((n, n), dtype=bool)
    for i in range(n):
        m[i, i] = True
        if i:
            m[i] |= m[rng.integers(0, i)]
    return m


def reference(q, kv, qo, kvp, slots, trees, sm_scale, tail=None):
    """float64 attention: prefix keys all visible, tail key j visible to row i iff tree[i, j]."""
    q, kv = q.astype(np.float64), kv.astype(np.float64)
    out = np.zeros((q.shape[0], q.shape[1], DL))
    lse = np.full(q.shape[:2], -np.inf)
    for b, tree in enumerate(trees):
        rows = range(qo[b], qo[b + 1])
        keys = kv[slots[kvp[b]:kvp[b + 1]]]
        if tail is not None:
            keys = np.concatenate([keys, tail.astype(np.float64)[qo[b]:qo[b + 1]]])
        prefix = len(keys) - len(rows)
        for i, t in enumerate(rows):
            visible = np.concatenate([np.ones(prefix, bool), tree[i]])
            s = sm_scale * (q[t] @ keys[visible].T)  # [H, visible]
            m = s.max(axis=1, keepdims=True)
            w = np.exp(s - m)
            out[t] = (w / w.sum(1, keepdims=True)) @ keys[visible][:, :DL]
            lse[t] = np.log(w.sum(1)) + m[:, 0]
    return out, lse


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_verify_paged_host_tree_dense_matches_numpy(index_dtype):
    rng = np.random.default_rng(1)
    q_lens, prefixes, heads = [3, 5, 1], [6, 0, 9], 2
    q, kv, qo, kvp, slots, _ = small_case(rng, q_lens, prefixes, heads, index_dtype=index_dtype)
    trees = [random_tree(rng, n) for n in q_lens]
    mask = np.concatenate([t.ravel() for t in trees]).astype(np.uint8)
    mask_indptr = np.concatenate([[0], np.cumsum([n * n for n in q_lens])]).astype(np.int64)
    out = np.zeros((q.shape[0], heads, DL), np.float32)
    lse = np.zeros((q.shape[0], heads), np.float32)
    scale = 1 / math.sqrt(D)
    kk.verify_paged_host(q, kv, qo, kvp, slots, out, sm_scale=scale, max_q_len=max(q_lens),
                         lse=lse, mask=mask, mask_indptr=mask_indptr,
                         mask_kind=kk.MASK_TREE_DENSE)
    want_out, want_lse = reference(q, kv, qo, kvp, slots, trees, scale)
    np.testing.assert_allclose(out, want_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-6, atol=1e-5)


def test_verify_paged_host_sglang_full_from_extend_matches_numpy():
    rng = np.random.default_rng(2)
    q_lens, prefixes, heads = [4, 2], [5, 3], 3
    q, kv, qo, kvp, slots, tail = small_case(rng, q_lens, prefixes, heads,
                                             tail_from_extend=True)
    trees = [random_tree(rng, n) for n in q_lens]
    # SGLang's full rows: prefix columns (ones) then the tree.
    rows = [np.concatenate([np.ones((n, p), bool), t], axis=1)
            for n, p, t in zip(q_lens, prefixes, trees)]
    mask = np.concatenate([r.ravel() for r in rows]).astype(np.uint8)
    mask_indptr = np.concatenate([[0], np.cumsum([r.size for r in rows])]).astype(np.int64)
    out = np.zeros((q.shape[0], heads, DL), np.float32)
    scale = 0.07
    kk.verify_paged_host(q, kv, qo, kvp, slots, out, sm_scale=scale, max_q_len=4,
                         tail_kv=tail, mask=mask, mask_indptr=mask_indptr,
                         mask_kind=kk.MASK_SGLANG_FULL)
    want, _ = reference(q, kv, qo, kvp, slots, trees, scale, tail=tail)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


def test_zero_size_batch_is_a_no_op():
    q = np.zeros((0, 1, D), np.float16)
    kv = np.zeros((4, D), np.float16)
    indptr = np.zeros(1, np.int32)
    out = np.zeros((0, 1, DL), np.float32)
    kk.verify_paged_host(q, kv, indptr, indptr, np.zeros(0, np.int32), out, sm_scale=1.0,
                         max_q_len=1)


def test_binding_checks_name_the_argument():
    q = np.zeros((2, 1, D), np.float16)
    kv = np.zeros((4, D), np.float16)
    indptr = np.array([0, 2], np.int32)
    idx = np.zeros(0, np.int32)
    with pytest.raises(TypeError, match="q: dtype float64"):
        kk.verify_paged_host(q.astype(np.float64), kv, indptr, indptr, idx,
                             np.zeros((2, 1, DL), np.float32), sm_scale=1.0, max_q_len=2)
    with pytest.raises(ValueError, match="out: last dimension is 576"):
        kk.verify_paged_host(q, kv, indptr, indptr, idx, np.zeros((2, 1, D), np.float32),
                             sm_scale=1.0, max_q_len=2)
    with pytest.raises(ValueError, match="q: the last dimension must have unit stride"):
        wide = np.zeros((2, 1, 2 * D), np.float16)[:, :, ::2]
        kk.verify_paged_host(wide, kv, indptr, indptr, idx, np.zeros((2, 1, DL), np.float32),
                             sm_scale=1.0, max_q_len=2)


def test_library_rejects_bad_dtype_with_its_message():
    q = np.zeros((1, 1, D), np.float16)
    kv = np.zeros((4, D), np.float16)
    indptr = np.array([0, 1], np.int32)
    out = np.zeros((1, 1, DL), np.float32)
    # int32 bit containers claimed to hold an unknown dtype code: the binding
    # cannot check a code it does not know, the library must.
    p = host_params()
    p.batch_size, p.num_heads, p.max_q_len, p.total_q = 1, 1, 1, 1
    p.q, p.q_dtype = q.ctypes.data, 99
    p.q_stride_token, p.q_stride_head = D, D
    p.kv_cache, p.kv_stride_slot, p.num_slots = kv.ctypes.data, D, 4
    p.qo_indptr, p.kv_indptr = indptr.ctypes.data, indptr.ctypes.data
    p.kv_indices = np.zeros(1, np.int32).ctypes.data
    p.out, p.out_dtype = out.ctypes.data, kk.DTYPE_F32
    p.out_stride_token, p.out_stride_head = DL, DL
    with pytest.raises((kk.UnsupportedError, kk.InvalidArgumentError)) as e:
        kk.lib.kdtree_verify_paged_host(ctypes.byref(p))
    assert "q_dtype" in e.value.message


def test_struct_size_unknown_is_struct_version_error():
    p = host_params()
    p.struct_size = 8
    with pytest.raises(kk.StructVersionError) as e:
        kk.lib.kdtree_verify_paged_host(ctypes.byref(p))
    assert "struct_size" in e.value.message


@pytest.mark.parametrize("status", sorted(kk.ERROR_CLASSES))
def test_each_status_maps_to_its_class(status):
    err = kk.errors.error_for(status, "kdtree_x: y is z", "kdtree_x")
    assert isinstance(err, kk.KDTreeError)
    assert type(err) is kk.ERROR_CLASSES[status]
    assert err.status == status and err.message == "kdtree_x: y is z"
    assert kk.status_string(status) in str(err)


# --------------------------------------------------------------------------
# Merge host twin, planner, fragmentation statistics
# --------------------------------------------------------------------------

def test_merge_attention_states_host():
    rng = np.random.default_rng(3)
    s, t, h, d = 3, 4, 2, 16
    states = rng.standard_normal((s, t, h, d)).astype(np.float32)
    states_lse = rng.standard_normal((s, t, h)).astype(np.float32)
    states_lse[1, 0, 0] = -np.inf
    out = np.zeros((t, h, d), np.float32)
    lse = np.zeros((t, h), np.float32)
    kk.merge_attention_states_host(states, states_lse, out, lse)
    want_lse = np.logaddexp.reduce(states_lse.astype(np.float64), axis=0)
    weights = np.exp(states_lse - want_lse)[..., None]
    np.testing.assert_allclose(lse, want_lse, rtol=1e-6)
    np.testing.assert_allclose(out, (weights * states).sum(0), rtol=1e-5, atol=1e-6)


def test_defrag_plan_and_fragmentation_stats():
    num_slots = 32
    requests = [[3, 9, 4, 20], [5, 6, 7], [11, 30, 12]]
    live = {x for r in requests for x in r}
    free = [x for x in range(1, num_slots) if x not in live]
    before = kk.fragmentation_stats(requests, free, num_slots=num_slots)
    assert before["num_requests"] == 3 and before["total_slots"] == 10
    assert list(before["runs_per_request"]) == [4, 1, 3]
    assert before["total_runs"] == 8 and before["max_runs"] == 4
    assert before["mean_run_length"] == pytest.approx(10 / 8)
    assert before["num_free"] == len(free)

    src, dst = kk.defrag_plan(requests, free, num_slots=num_slots, budget=16,
                              pinned_slots=[], reserved_slots=[0])
    assert len(src) == len(dst) > 0
    assert set(dst) <= set(free) and len(set(dst)) == len(dst) and 0 not in dst
    moved = dict(zip(src.tolist(), dst.tolist()))
    after_requests = [[moved.get(x, x) for x in r] for r in requests]
    after_free = sorted((set(free) - set(dst)) | set(src))
    after = kk.fragmentation_stats(after_requests, after_free, num_slots=num_slots)
    assert after["total_runs"] < before["total_runs"]


def test_defrag_plan_rejects_duplicate_slot_with_message():
    with pytest.raises(kk.InvalidArgumentError) as e:
        kk.defrag_plan([[1, 2]], [2, 3], num_slots=8, budget=4)
    assert e.value.message.startswith("kdtree_defrag_plan")


# --------------------------------------------------------------------------
# Device entry points without a GPU
# --------------------------------------------------------------------------

@pytest.mark.skipif(device_present(), reason="a CUDA device is present")
def test_device_calls_raise_no_device():
    with pytest.raises(kk.NoDeviceError) as e:
        kk.prepare(0)
    assert e.value.message
    with pytest.raises(kk.NoDeviceError):
        kk.device_supported(0)
    # Raw pointers pass the binding's checks untouched; the library answers.
    p = host_params()
    p.batch_size, p.num_heads, p.max_q_len, p.total_q, p.max_kv_len = 1, 1, 1, 1, 1
    for field in ("q", "kv_cache", "qo_indptr", "kv_indptr", "kv_indices", "out"):
        setattr(p, field, 256)
    p.q_stride_token = p.q_stride_head = D
    p.kv_stride_slot, p.num_slots = D, 1
    p.out_stride_token = p.out_stride_head = DL
    with pytest.raises(kk.NoDeviceError):
        kk.lib.kdtree_verify_paged(ctypes.byref(p), None, 0, None)
    with pytest.raises(kk.NoDeviceError):
        kk.lib.kdtree_verify_paged_reference(ctypes.byref(p), None)
    with pytest.raises(kk.NoDeviceError):
        kk.sort_slots(256, num_slots=8, count=4, index_dtype=kk.DTYPE_INT32, workspace=512)


def test_device_functions_reject_host_arrays():
    q = np.zeros((1, 1, D), np.float16)
    with pytest.raises(ValueError, match="q: expected device memory"):
        kk.verify_paged(q, 0, 0, 0, 0, 0, sm_scale=1.0, max_q_len=1)


class CudaArray:
    """A minimal __cuda_array_interface__ exporter (no memory behind it)."""

    def __init__(self, shape, typestr, strides=None, ptr=4096):
        self.__cuda_array_interface__ = dict(shape=shape, typestr=typestr, strides=strides,
                                             data=(ptr, False), version=3)


@pytest.mark.skipif(device_present(), reason="a CUDA device is present")
def test_cuda_array_interface_arguments_reach_the_library():
    t, h = 4, 16
    paged = (CudaArray((t, h, D), "<f2"), CudaArray((100, 1, D), "<f2"),
             CudaArray((2,), "<i4"), CudaArray((2,), "<i4"), CudaArray((50,), "<i8"))
    out = CudaArray((t, h, DL), "<f4")
    sglang = dict(tail_kv=CudaArray((t, 1, D), "<f2"), mask=CudaArray((400,), "|u1"),
                  mask_indptr=CudaArray((2,), "<i8"), mask_kind=kk.MASK_SGLANG_FULL)
    with pytest.raises(kk.NoDeviceError, match="kdtree_verify_paged_reference"):
        kk.verify_paged_reference(*paged, out, sm_scale=0.1, max_q_len=4, **sglang)
    with pytest.raises(kk.NoDeviceError):
        kk.verify_paged(*paged, out, sm_scale=0.1, max_q_len=4, workspace=1 << 20, **sglang)
    with pytest.raises(kk.NoDeviceError, match="kdtree_merge_attention_states"):
        kk.merge_attention_states(CudaArray((2, t, h, DL), "<f4"), CudaArray((2, t, h), "<f4"),
                                  CudaArray((t, h, DL), "<f4"))
    with pytest.raises(kk.NoDeviceError, match="kdtree_defrag_copy"):
        kk.defrag_copy(CudaArray((61,), "<u8"), CudaArray((10,), "<i4"),
                       CudaArray((10,), "<i4"), slot_stride_bytes=1152, row_bytes=1152,
                       num_slots=1000)
    with pytest.raises(kk.NoDeviceError, match="kdtree_defrag_remap"):
        kk.defrag_remap(CudaArray((8, 100), "<i4"), CudaArray((10,), "<i4"),
                        CudaArray((10,), "<i4"), num_slots=1000, workspace=4096)
    with pytest.raises(kk.NoDeviceError, match="kdtree_verify_contiguous"):
        kk.verify_contiguous(CudaArray((4, h, D), "<f4"), CudaArray((100, D), "<f4"),
                             CudaArray((4, h, DL), "<f4"), sm_scale=0.1)
    with pytest.raises(TypeError, match="kv_indices: expected dtype int32 or int64"):
        kk.verify_paged(*paged[:4], CudaArray((50,), "<f4"), out, sm_scale=0.1, max_q_len=4)
    with pytest.raises(ValueError, match="kv_indptr: has 1 elements, needs 2"):
        kk.verify_paged(paged[0], paged[1], paged[2], CudaArray((1,), "<i4"), paged[4], out,
                        sm_scale=0.1, max_q_len=4)
