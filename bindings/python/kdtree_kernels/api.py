"""High-level Python functions over the C entry points.

Each function builds the params struct from the caller's arrays, checks what
only the binding can see (shapes, element strides of dimensions the ABI
assumes unit-stride, devices, dtypes) and calls the library, which validates
everything else and reports failures as KDTreeError subclasses. Device
functions only enqueue work on the caller's stream: no synchronisation.
"""

import ctypes

from . import _structs as s
from ._arrays import (check_ndim, check_raw, check_same_device, device_view, dtype_code,
                      host_view, itemsize, ptr, stream_handle)
from ._lib import lib

HEAD_DIM_LATENT = 512
HEAD_DIM_ROPE = 64

_Q_DTYPES = (s.DTYPE_BF16, s.DTYPE_F16)
_KV_DTYPES = (s.DTYPE_BF16, s.DTYPE_F16, s.DTYPE_FP8_E4M3)
_OUT_DTYPES = (s.DTYPE_BF16, s.DTYPE_F16, s.DTYPE_F32)
_INDEX_DTYPES = (s.DTYPE_INT32, s.DTYPE_INT64)
_MASK_BYTES = ("uint8", "bool")


# --------------------------------------------------------------------------
# Version, errors, device
# --------------------------------------------------------------------------

def version():
    """The loaded library's version string ("0.1.0")."""
    return lib.kdtree_version_string().decode()


def version_number():
    return int(lib.kdtree_version_number())


def abi_version():
    return int(lib.kdtree_abi_version())


def build_info():
    """Version, CUDA version and compiled SM list of the loaded library."""
    return lib.kdtree_build_info().decode()


def status_string(status):
    """The library's name of a status ("KDTREE_ERROR_MISALIGNED")."""
    return lib.kdtree_status_string(int(status)).decode()


def last_error_message():
    """The library's message for the last failing call on this thread."""
    return lib.kdtree_last_error_message().decode()


def struct_size(struct_name):
    """sizeof of a public struct as the library was compiled."""
    size = ctypes.c_size_t()
    lib.kdtree_struct_size(struct_name.encode(), ctypes.byref(size))
    return size.value


def prepare(device=0):
    """Sets the kernel attributes on `device` ahead of CUDA-graph capture."""
    lib.kdtree_prepare(int(device))


def device_supported(device=0):
    """True when the library has a kernel image that runs on `device`."""
    ok = ctypes.c_int32()
    lib.kdtree_device_supported(int(device), ctypes.byref(ok))
    return bool(ok.value)


# --------------------------------------------------------------------------
# Shared checks
# --------------------------------------------------------------------------

def _dim(given, view, axis, what):
    """A size from an explicit argument, else from an array's shape."""
    if given is not None:
        if view is not None and view.checked and view.shape[axis] != given:
            raise ValueError(f"{view.name}: dimension {axis} is {view.shape[axis]}, "
                             f"expected {what} = {given}")
        return int(given)
    if view is None or not view.checked:
        raise ValueError(f"{what} must be given when {view.name if view else 'its array'} "
                         "is a raw pointer")
    return int(view.shape[axis])


def _rows(view, width, what):
    """Checks a [rows, width] or [rows, 1, width] row array with unit inner stride;
    returns its row stride in elements (None for a raw pointer)."""
    if view is None or not view.checked:
        return None
    shape, strides = view.shape, view.strides
    if len(shape) == 3 and shape[1] == 1:
        shape, strides = (shape[0], shape[2]), (strides[0], strides[2])
    if len(shape) != 2 or shape[1] != width:
        raise ValueError(f"{view.name}: expected {what} rows of {width} elements "
                         f"([n, {width}] or [n, 1, {width}]), got shape {view.shape}")
    if strides[1] != 1 and shape[1] > 1:
        raise ValueError(f"{view.name}: the last dimension must have unit stride")
    return int(strides[0])


def _heads(view, width):
    """Checks a [tokens, heads, width] array with unit stride in width;
    returns (token stride, head stride) in elements (None for raw)."""
    if view is None or not view.checked:
        return None
    check_ndim(view, 3)
    if view.shape[2] != width:
        raise ValueError(f"{view.name}: last dimension is {view.shape[2]}, expected {width}")
    if view.strides[2] != 1:
        raise ValueError(f"{view.name}: the last dimension must have unit stride")
    return int(view.strides[0]), int(view.strides[1])


def _vector(view, dtypes, length=None, what=None):
    """Checks a 1-D contiguous array of one of `dtypes`, optionally of a length."""
    if view is None or not view.checked:
        return
    check_raw(view, dtypes)
    check_ndim(view, 1)
    if view.shape[0] > 1 and view.strides[0] != 1:
        raise ValueError(f"{view.name}: must be contiguous")
    if length is not None and view.shape[0] < length:
        raise ValueError(f"{view.name}: has {view.shape[0]} elements, needs {length} ({what})")


def _contiguous(view, shape):
    """Checks an array the ABI reads as a dense C-ordered block of `shape`."""
    if view is None or not view.checked:
        return
    if tuple(view.shape) != tuple(shape):
        raise ValueError(f"{view.name}: expected shape {tuple(shape)}, got {view.shape}")
    expect, acc = [], 1
    for d in reversed(shape):
        expect.append(acc)
        acc *= d
    for d, st, ex in zip(shape, view.strides, reversed(expect)):
        if d > 1 and st != ex:
            raise ValueError(f"{view.name}: must be contiguous (C order)")


def _strides(given, derived, name):
    if given is not None:
        return tuple(int(x) for x in given)
    if derived is None:
        raise ValueError(f"{name} must be given for a raw pointer")
    return derived


def _workspace_ptr(workspace, size, views, what):
    """The workspace pointer: the caller's, or (torch callers only) a fresh
    torch.empty on the arrays' device, which the caching allocator serves
    stream-ordered without synchronising."""
    if size == 0 and workspace is None:
        return None, 0, None
    if workspace is not None:
        w = device_view("workspace", workspace)
        nbytes = w.numel() * itemsize(w.dtype) if w.checked else size
        return w.ptr, nbytes, workspace
    torch_views = [v for v in views if v is not None and v.torch]
    if not torch_views:
        raise ValueError(f"workspace: {what} needs {size} bytes of device workspace; "
                         "pass one (integer pointer or device array)")
    import sys
    torch = sys.modules["torch"]
    buf = torch.empty(size, dtype=torch.uint8, device=torch_views[0].obj.device)
    return int(buf.data_ptr()), size, buf


# --------------------------------------------------------------------------
# Verify attention
# --------------------------------------------------------------------------

def _paged_params(view, q, kv_cache, qo_indptr, kv_indptr, kv_indices, out, *, sm_scale,
                  max_q_len, lse=None, tail_kv=None, mask=None, mask_indptr=None,
                  mask_kind=s.MASK_NONE, tail_source=None, mask_row_bytes=0, kv_scale=1.0,
                  num_splits=0, max_kv_len=None, error_flag=None, batch_size=None,
                  num_heads=None, total_q=None, num_slots=None, q_dtype=None, kv_dtype=None,
                  out_dtype=None, index_dtype=None, q_strides=None, kv_stride_slot=None,
                  out_strides=None, tail_kv_stride=None, head_dim_latent=HEAD_DIM_LATENT,
                  head_dim_rope=HEAD_DIM_ROPE):
    """Fills VerifyPagedParams; `view` is device_view or host_view."""
    d = head_dim_latent + head_dim_rope
    wr = {"writable": True} if view is host_view else {}
    vq = view("q", q)
    vkv = view("kv_cache", kv_cache)
    vqo = view("qo_indptr", qo_indptr)
    vkvp = view("kv_indptr", kv_indptr)
    vidx = view("kv_indices", kv_indices)
    vout = view("out", out, **wr)
    vlse = view("lse", lse, required=False, **wr)
    vtail = view("tail_kv", tail_kv, required=False)
    vmask = view("mask", mask, required=False)
    vmip = view("mask_indptr", mask_indptr, required=False)
    vflag = view("error_flag", error_flag, required=False, **wr)
    views = [vq, vkv, vqo, vkvp, vidx, vout, vlse, vtail, vmask, vmip, vflag]
    if view is device_view:
        check_same_device(views)

    p = s.VerifyPagedParams()
    lib.kdtree_verify_paged_params_init(ctypes.byref(p))
    if batch_size is None:
        if not vqo.checked:
            raise ValueError("batch_size must be given when qo_indptr is a raw pointer")
        batch_size = vqo.shape[0] - 1
    p.batch_size = int(batch_size)
    p.num_heads = _dim(num_heads, vq, 1, "num_heads")
    p.head_dim_latent = head_dim_latent
    p.head_dim_rope = head_dim_rope
    p.max_q_len = int(max_q_len)
    p.total_q = _dim(total_q, vq, 0, "total_q")
    p.num_splits = int(num_splits)
    p.sm_scale = float(sm_scale)

    q_s = _strides(q_strides, _heads(vq, d), "q_strides")
    p.q = ptr(vq)
    p.q_dtype = dtype_code(vq, _Q_DTYPES, q_dtype)
    p.q_stride_token, p.q_stride_head = q_s

    p.kv_cache = ptr(vkv)
    p.kv_dtype = dtype_code(vkv, _KV_DTYPES, kv_dtype)
    p.kv_scale = float(kv_scale)
    p.kv_stride_slot = int(kv_stride_slot if kv_stride_slot is not None else
                           _strides(None, _rows(vkv, d, "KV"), "kv_stride_slot"))
    p.num_slots = _dim(num_slots, vkv, 0, "num_slots")

    _vector(vqo, ("int32",), p.batch_size + 1, "batch_size + 1")
    _vector(vkvp, ("int32",), p.batch_size + 1, "batch_size + 1")
    _vector(vidx, ("int32", "int64"))
    p.qo_indptr = ptr(vqo)
    p.kv_indptr = ptr(vkvp)
    p.kv_indices = ptr(vidx)
    p.index_dtype = dtype_code(vidx, _INDEX_DTYPES, index_dtype)

    if tail_source is None:
        tail_source = s.TAIL_FROM_EXTEND if tail_kv is not None else s.TAIL_FROM_INDICES
    p.tail_source = int(tail_source)
    if vtail is not None:
        if vtail.checked and vkv.checked and vtail.dtype != vkv.dtype:
            raise TypeError(f"tail_kv: dtype {vtail.dtype} differs from kv_cache's {vkv.dtype}")
        p.tail_kv = ptr(vtail)
        p.tail_kv_stride = int(tail_kv_stride if tail_kv_stride is not None else
                               _strides(None, _rows(vtail, d, "tail KV"), "tail_kv_stride"))

    p.mask_kind = int(mask_kind)
    check_raw(vmask, _MASK_BYTES)
    _vector(vmip, ("int64",), p.batch_size + 1, "batch_size + 1")
    p.mask = ptr(vmask)
    p.mask_indptr = ptr(vmip)
    p.mask_row_bytes = int(mask_row_bytes)

    o_s = _strides(out_strides, _heads(vout, head_dim_latent), "out_strides")
    p.out = ptr(vout)
    p.out_dtype = dtype_code(vout, _OUT_DTYPES, out_dtype)
    p.out_stride_token, p.out_stride_head = o_s
    if vout.checked and vout.shape[:2] != (p.total_q, p.num_heads):
        raise ValueError(f"out: shape {vout.shape} does not match q's "
                         f"[{p.total_q}, {p.num_heads}, {head_dim_latent}]")
    if vlse is not None:
        check_raw(vlse, ("float32",))
        _contiguous(vlse, (p.total_q, p.num_heads))
        p.lse = ptr(vlse)
    if vflag is not None:
        check_raw(vflag, ("int32",))
        p.error_flag = ptr(vflag)

    if max_kv_len is None:
        # An upper bound of every prefix_b + q_len_b that needs no device read.
        max_kv_len = (vidx.numel() + p.max_q_len) if vidx.checked else 0
    p.max_kv_len = int(max_kv_len)
    return p, views


def verify_workspace_size(q, kv_cache, qo_indptr, kv_indptr, kv_indices, out, **kw):
    """Bytes of device workspace verify_paged needs for these arguments."""
    p, _ = _paged_params(device_view, q, kv_cache, qo_indptr, kv_indptr, kv_indices, out, **kw)
    size = ctypes.c_size_t()
    lib.kdtree_verify_workspace_size(ctypes.byref(p), ctypes.byref(size))
    return size.value


def verify_paged(q, kv_cache, qo_indptr, kv_indptr, kv_indices, out, *, workspace=None,
                 stream=None, **kw):
    """Tree-verify attention over a paged KV cache (kdtree_verify_paged).

    q [total_q, H, 576] bf16/fp16; kv_cache [num_slots, 576] (or [num_slots, 1, 576]);
    qo_indptr, kv_indptr int32 [B+1]; kv_indices int32/int64; out [total_q, H, 512].
    Keywords: sm_scale, max_q_len (required); lse, tail_kv (selects
    TAIL_FROM_EXTEND), mask, mask_indptr, mask_kind, mask_row_bytes, kv_scale,
    num_splits, max_kv_len, error_flag; for raw pointers batch_size, num_heads,
    total_q, num_slots, *_dtype and strides. `workspace`: device memory of at
    least verify_workspace_size() bytes (allocated with torch for torch callers
    when omitted). `stream`: int handle, stream object, or None for the arrays'
    current stream.
    """
    p, views = _paged_params(device_view, q, kv_cache, qo_indptr, kv_indptr, kv_indices,
                             out, **kw)
    size = ctypes.c_size_t()
    lib.kdtree_verify_workspace_size(ctypes.byref(p), ctypes.byref(size))
    ws, ws_bytes, _keep = _workspace_ptr(workspace, size.value, views, "verify_paged")
    lib.kdtree_verify_paged(ctypes.byref(p), ws, ws_bytes, stream_handle(stream, views))
    return out


def verify_paged_reference(q, kv_cache, qo_indptr, kv_indptr, kv_indices, out, *,
                           stream=None, **kw):
    """The naive GPU oracle (fp32 math), same arguments as verify_paged."""
    p, views = _paged_params(device_view, q, kv_cache, qo_indptr, kv_indptr, kv_indices,
                             out, **kw)
    lib.kdtree_verify_paged_reference(ctypes.byref(p), stream_handle(stream, views))
    return out


def verify_paged_host(q, kv_cache, qo_indptr, kv_indptr, kv_indices, out, **kw):
    """The CPU reference (fp64 accumulation) on NumPy arrays; same arguments as
    verify_paged. bf16 data may be given as uint16 bit patterns with
    q_dtype/kv_dtype/out_dtype=DTYPE_BF16 (or as ml_dtypes.bfloat16)."""
    p, _ = _paged_params(host_view, q, kv_cache, qo_indptr, kv_indptr, kv_indices, out, **kw)
    lib.kdtree_verify_paged_host(ctypes.byref(p))
    return out


def verify_contiguous(q, kv, out, *, sm_scale, mask_kind=s.MASK_NONE, mask=None,
                      mask_row_bytes=0, lse=None, dtype=None, out_dtype=None,
                      num_heads=None, q_len=None, kv_len=None, q_strides=None,
                      kv_stride=None, out_strides=None, stream=None):
    """One request, contiguous KV (kdtree_verify_contiguous): q [q_len, H, 576],
    kv [kv_len, 576] whose last q_len rows are the tail, out [q_len, H, 512];
    f32 or bf16."""
    d = HEAD_DIM_LATENT + HEAD_DIM_ROPE
    vq, vkv, vout = device_view("q", q), device_view("kv", kv), device_view("out", out)
    vmask = device_view("mask", mask, required=False)
    vlse = device_view("lse", lse, required=False)
    views = [vq, vkv, vout, vmask, vlse]
    check_same_device(views)
    p = s.VerifyContiguousParams()
    lib.kdtree_verify_contiguous_params_init(ctypes.byref(p))
    p.num_heads = _dim(num_heads, vq, 1, "num_heads")
    p.head_dim_latent, p.head_dim_rope = HEAD_DIM_LATENT, HEAD_DIM_ROPE
    p.q_len = _dim(q_len, vq, 0, "q_len")
    p.dtype = dtype_code(vq, (s.DTYPE_F32, s.DTYPE_BF16), dtype)
    if vkv.checked and vq.checked and vkv.dtype != vq.dtype:
        raise TypeError(f"kv: dtype {vkv.dtype} differs from q's {vq.dtype}")
    p.kv_len = _dim(kv_len, vkv, 0, "kv_len")
    p.sm_scale = float(sm_scale)
    p.mask_kind = int(mask_kind)
    p.q = ptr(vq)
    p.q_stride_token, p.q_stride_head = _strides(q_strides, _heads(vq, d), "q_strides")
    p.kv = ptr(vkv)
    p.kv_stride = int(kv_stride if kv_stride is not None else
                      _strides(None, _rows(vkv, d, "KV"), "kv_stride"))
    check_raw(vmask, _MASK_BYTES)
    p.mask = ptr(vmask)
    p.mask_row_bytes = int(mask_row_bytes)
    p.out = ptr(vout)
    p.out_dtype = dtype_code(vout, (s.DTYPE_F32, s.DTYPE_BF16), out_dtype)
    p.out_stride_token, p.out_stride_head = _strides(out_strides,
                                                     _heads(vout, HEAD_DIM_LATENT),
                                                     "out_strides")
    if vlse is not None:
        check_raw(vlse, ("float32",))
        _contiguous(vlse, (p.q_len, p.num_heads))
        p.lse = ptr(vlse)
    lib.kdtree_verify_contiguous(ctypes.byref(p), stream_handle(stream, views))
    return out


# --------------------------------------------------------------------------
# Merge of attention states
# --------------------------------------------------------------------------

def _merge_params(view, states, states_lse, out, lse, states_dtype, out_dtype, num_states,
                  num_tokens, num_heads, head_dim, states_strides, out_strides):
    wr = {"writable": True} if view is host_view else {}
    vs, vsl = view("states", states), view("states_lse", states_lse)
    vout, vlse = view("out", out, **wr), view("lse", lse, required=False, **wr)
    views = [vs, vsl, vout, vlse]
    if view is device_view:
        check_same_device(views)
    p = s.MergeParams()
    lib.kdtree_merge_params_init(ctypes.byref(p))
    check_ndim(vs, 4)
    p.num_states = _dim(num_states, vs, 0, "num_states")
    p.num_tokens = _dim(num_tokens, vs, 1, "num_tokens")
    p.num_heads = _dim(num_heads, vs, 2, "num_heads")
    p.head_dim = _dim(head_dim, vs, 3, "head_dim")
    p.states = ptr(vs)
    p.states_dtype = dtype_code(vs, _OUT_DTYPES, states_dtype)
    derived = None
    if vs.checked:
        if vs.strides[3] != 1 and p.head_dim > 1:
            raise ValueError("states: the last dimension must have unit stride")
        derived = tuple(int(x) for x in vs.strides[:3])
    (p.states_stride_state, p.states_stride_token,
     p.states_stride_head) = _strides(states_strides, derived, "states_strides")
    check_raw(vsl, ("float32",))
    _contiguous(vsl, (p.num_states, p.num_tokens, p.num_heads))
    p.states_lse = ptr(vsl)
    p.out = ptr(vout)
    p.out_dtype = dtype_code(vout, _OUT_DTYPES, out_dtype)
    p.out_stride_token, p.out_stride_head = _strides(out_strides, _heads(vout, p.head_dim),
                                                     "out_strides")
    if vlse is not None:
        check_raw(vlse, ("float32",))
        _contiguous(vlse, (p.num_tokens, p.num_heads))
        p.lse = ptr(vlse)
    return p, views


def merge_attention_states(states, states_lse, out, lse=None, *, stream=None,
                           states_dtype=None, out_dtype=None, num_states=None,
                           num_tokens=None, num_heads=None, head_dim=None,
                           states_strides=None, out_strides=None):
    """S partial (out, lse) states into one: states [S, tokens, H, Dv],
    states_lse f32 [S, tokens, H], out [tokens, H, Dv], lse f32 [tokens, H]."""
    p, views = _merge_params(device_view, states, states_lse, out, lse, states_dtype,
                             out_dtype, num_states, num_tokens, num_heads, head_dim,
                             states_strides, out_strides)
    lib.kdtree_merge_attention_states(ctypes.byref(p), stream_handle(stream, views))
    return out


def merge_attention_states_host(states, states_lse, out, lse=None, *, states_dtype=None,
                                out_dtype=None):
    """Host twin of merge_attention_states on NumPy arrays (fp64 accumulation)."""
    p, _ = _merge_params(host_view, states, states_lse, out, lse, states_dtype, out_dtype,
                         None, None, None, None, None, None)
    lib.kdtree_merge_attention_states_host(ctypes.byref(p))
    return out


# --------------------------------------------------------------------------
# Defragmentation
# --------------------------------------------------------------------------

def _moves(vsrc, vdst, max_moves, index_dtype):
    _vector(vsrc, ("int32", "int64"))
    _vector(vdst, ("int32", "int64"))
    if vsrc.checked and vdst.checked and vsrc.dtype != vdst.dtype:
        raise TypeError(f"dst_slots: dtype {vdst.dtype} differs from src_slots' {vsrc.dtype}")
    code = dtype_code(vsrc, _INDEX_DTYPES, index_dtype)
    n = _dim(max_moves, vsrc, 0, "max_moves")
    if vdst.checked and vdst.shape[0] < n:
        raise ValueError(f"dst_slots: has {vdst.shape[0]} elements, src_slots {n}")
    return code, n


def defrag_copy(layer_base, src_slots, dst_slots, *, slot_stride_bytes, row_bytes, num_slots,
                num_moves=None, error_flag=None, max_moves=None, num_layers=None,
                index_dtype=None, stream=None):
    """Copies row_bytes from slot src[m] to dst[m] in every layer, one launch.
    layer_base: device uint64/int64 [num_layers] of layer base addresses."""
    vb = device_view("layer_base", layer_base)
    vsrc, vdst = device_view("src_slots", src_slots), device_view("dst_slots", dst_slots)
    vn = device_view("num_moves", num_moves, required=False)
    vflag = device_view("error_flag", error_flag, required=False)
    views = [vb, vsrc, vdst, vn, vflag]
    check_same_device(views)
    _vector(vb, ("uint64", "int64"))
    _vector(vn, ("int64",), 1, "one count")
    check_raw(vflag, ("int32",))
    p = s.DefragCopyParams()
    lib.kdtree_defrag_copy_params_init(ctypes.byref(p))
    p.num_layers = _dim(num_layers, vb, 0, "num_layers")
    p.layer_base = ptr(vb)
    p.slot_stride_bytes, p.row_bytes, p.num_slots = (int(slot_stride_bytes), int(row_bytes),
                                                     int(num_slots))
    p.index_dtype, p.max_moves = _moves(vsrc, vdst, max_moves, index_dtype)
    p.src_slots, p.dst_slots = ptr(vsrc), ptr(vdst)
    p.num_moves, p.error_flag = ptr(vn), ptr(vflag)
    lib.kdtree_defrag_copy(ctypes.byref(p), stream_handle(stream, views))


def _remap_params(table, src_slots, dst_slots, num_slots, row_lengths, num_moves, error_flag,
                  max_moves, index_dtype, table_dtype, rows, cols, row_stride):
    vt = device_view("table", table)
    vsrc, vdst = device_view("src_slots", src_slots), device_view("dst_slots", dst_slots)
    vlen = device_view("row_lengths", row_lengths, required=False)
    vn = device_view("num_moves", num_moves, required=False)
    vflag = device_view("error_flag", error_flag, required=False)
    views = [vt, vsrc, vdst, vlen, vn, vflag]
    check_same_device(views)
    check_ndim(vt, 2)
    _vector(vlen, ("int32",))
    _vector(vn, ("int64",), 1, "one count")
    check_raw(vflag, ("int32",))
    p = s.DefragRemapParams()
    lib.kdtree_defrag_remap_params_init(ctypes.byref(p))
    p.table_dtype = dtype_code(vt, _INDEX_DTYPES, table_dtype)
    p.table = ptr(vt)
    p.rows = _dim(rows, vt, 0, "rows")
    p.cols = _dim(cols, vt, 1, "cols")
    derived = None
    if vt.checked:
        if vt.strides[1] != 1 and p.cols > 1:
            raise ValueError("table: the column dimension must have unit stride")
        derived = int(vt.strides[0])
    p.row_stride = int(row_stride if row_stride is not None else
                       _strides(None, derived, "row_stride"))
    p.row_lengths = ptr(vlen)
    p.num_slots = int(num_slots)
    p.index_dtype, p.max_moves = _moves(vsrc, vdst, max_moves, index_dtype)
    p.src_slots, p.dst_slots = ptr(vsrc), ptr(vdst)
    p.num_moves, p.error_flag = ptr(vn), ptr(vflag)
    return p, views


def defrag_remap_workspace_size(table, src_slots, dst_slots, *, num_slots, row_lengths=None,
                                num_moves=None, error_flag=None, max_moves=None,
                                index_dtype=None, table_dtype=None, rows=None, cols=None,
                                row_stride=None):
    """Bytes of device workspace defrag_remap needs (the dense slot map)."""
    p, _ = _remap_params(table, src_slots, dst_slots, num_slots, row_lengths, num_moves,
                         error_flag, max_moves, index_dtype, table_dtype, rows, cols,
                         row_stride)
    size = ctypes.c_size_t()
    lib.kdtree_defrag_remap_workspace_size(ctypes.byref(p), ctypes.byref(size))
    return size.value


def defrag_remap(table, src_slots, dst_slots, *, num_slots, workspace=None, row_lengths=None,
                 num_moves=None, error_flag=None, max_moves=None, index_dtype=None,
                 table_dtype=None, rows=None, cols=None, row_stride=None, stream=None):
    """Rewrites every table entry equal to a moved source into its destination.
    table: device int32/int64 [rows, cols] (req_to_token)."""
    p, views = _remap_params(table, src_slots, dst_slots, num_slots, row_lengths, num_moves,
                             error_flag, max_moves, index_dtype, table_dtype, rows, cols,
                             row_stride)
    size = ctypes.c_size_t()
    lib.kdtree_defrag_remap_workspace_size(ctypes.byref(p), ctypes.byref(size))
    ws, ws_bytes, _keep = _workspace_ptr(workspace, size.value, views, "defrag_remap")
    lib.kdtree_defrag_remap(ctypes.byref(p), ws, ws_bytes, stream_handle(stream, views))


def _plan_params(requests, free_slots, num_slots, pinned_slots, reserved_slots):
    """Host planner params over NumPy int64 copies (kept alive in `keep`)."""
    import numpy as np

    slots = [np.asarray(r, dtype=np.int64).ravel() for r in requests]
    indptr = np.zeros(len(slots) + 1, dtype=np.int64)
    if slots:
        indptr[1:] = np.cumsum([len(r) for r in slots])
    flat = np.ascontiguousarray(np.concatenate(slots) if slots else np.zeros(0, np.int64))
    free = np.ascontiguousarray(np.asarray(free_slots, dtype=np.int64).ravel())
    pinned = np.ascontiguousarray(np.asarray(pinned_slots, dtype=np.int64).ravel())
    reserved = np.ascontiguousarray(np.asarray(reserved_slots, dtype=np.int64).ravel())
    keep = (indptr, flat, free, pinned, reserved)
    p = s.DefragPlanParams()
    lib.kdtree_defrag_plan_params_init(ctypes.byref(p))
    p.num_slots = int(num_slots)
    p.num_requests = len(slots)
    p.request_indptr = indptr.ctypes.data
    p.request_slots = flat.ctypes.data
    p.free_slots, p.num_free = free.ctypes.data, free.size
    p.pinned_slots, p.num_pinned = pinned.ctypes.data, pinned.size
    p.reserved_slots, p.num_reserved = reserved.ctypes.data, reserved.size
    return p, keep


def defrag_plan(requests, free_slots, *, num_slots, budget, pinned_slots=(),
                reserved_slots=()):
    """Host planner. requests: a sequence of per-request slot lists (token
    order); returns (move_src, move_dst) as int64 NumPy arrays, at most
    `budget` moves, most fragmented request first."""
    import numpy as np

    p, keep = _plan_params(requests, free_slots, num_slots, pinned_slots, reserved_slots)
    move_src = np.zeros(max(int(budget), 0), dtype=np.int64)
    move_dst = np.zeros_like(move_src)
    count = ctypes.c_int64()
    p.budget = int(budget)
    p.move_src, p.move_dst = move_src.ctypes.data, move_dst.ctypes.data
    p.num_moves = ctypes.addressof(count)
    lib.kdtree_defrag_plan(ctypes.byref(p))
    del keep
    return move_src[:count.value].copy(), move_dst[:count.value].copy()


def fragmentation_stats(requests, free_slots, *, num_slots, pinned_slots=()):
    """Host fragmentation statistics: a dict of the kdtree_fragmentation_stats
    fields plus "runs_per_request" (int64 NumPy array). pinned_slots: as the
    planner's (slots that several requests may share)."""
    import numpy as np

    p, keep = _plan_params(requests, free_slots, num_slots, pinned_slots, ())
    runs = np.zeros(p.num_requests, dtype=np.int64)
    st = s.FragmentationStats()
    st.struct_size = ctypes.sizeof(st)
    lib.kdtree_fragmentation_stats_compute(
        ctypes.byref(p), runs.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)),
        ctypes.byref(st))
    del keep
    result = {name: getattr(st, name) for name, _ in s.FragmentationStats._fields_
              if name not in ("struct_size", "reserved0")}
    result["runs_per_request"] = runs
    return result


def sort_slots_workspace_size(index_dtype, count, num_slots):
    size = ctypes.c_size_t()
    lib.kdtree_sort_slots_workspace_size(int(index_dtype), int(count), int(num_slots),
                                         ctypes.byref(size))
    return size.value


def sort_slots(slots, *, num_slots, workspace=None, count=None, index_dtype=None,
               stream=None):
    """Sorts `count` device slot ids (int32/int64, values in [0, num_slots))
    ascending in place (CUB radix sort)."""
    v = device_view("slots", slots)
    _vector(v, ("int32", "int64"))
    code = dtype_code(v, _INDEX_DTYPES, index_dtype)
    n = int(count) if count is not None else _dim(None, v, 0, "count")
    if v.checked and n > v.shape[0]:
        raise ValueError(f"slots: count {n} exceeds its {v.shape[0]} elements")
    size = sort_slots_workspace_size(code, n, num_slots)
    ws, ws_bytes, _keep = _workspace_ptr(workspace, size, [v], "sort_slots")
    lib.kdtree_sort_slots(v.ptr or None, code, n, int(num_slots), ws, ws_bytes,
                          stream_handle(stream, [v]))
    return slots
