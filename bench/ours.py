"""kdtree_verify_paged through ctypes.

Uses the project's Python bindings (bindings/python, `kdtree_kernels`) when they
import against the library under test; otherwise a private mirror of
kdtree_verify_paged_params from include/kdtree_kernels.h. Either way the
mirror's size is checked against the library's kdtree_struct_size() before the
first call, and every status is checked.
"""

import ctypes
import os
import sys
from pathlib import Path
from typing import Optional

import torch

from inputs import InputSet

REPO = Path(__file__).resolve().parent.parent

# include/kdtree_kernels.h constants used here.
KDTREE_DTYPE_F32 = 0
KDTREE_DTYPE_BF16 = 1
KDTREE_DTYPE_FP8_E4M3 = 3
KDTREE_DTYPE_INT32 = 4
KDTREE_MASK_TREE_DENSE = 2
KDTREE_TAIL_FROM_INDICES = 0

_vp, _i32, _i64, _u32, _f32 = (ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64,
                               ctypes.c_uint32, ctypes.c_float)


class _VerifyPagedParams(ctypes.Structure):
    """Private mirror of kdtree_verify_paged_params (field for field, same order)."""

    _fields_ = [
        ("struct_size", _u32), ("batch_size", _i32), ("num_heads", _i32),
        ("head_dim_latent", _i32), ("head_dim_rope", _i32), ("max_q_len", _i32),
        ("total_q", _i64), ("max_kv_len", _i64), ("num_splits", _i32), ("sm_scale", _f32),
        ("q", _vp), ("q_dtype", _i32), ("reserved0", _i32),
        ("q_stride_token", _i64), ("q_stride_head", _i64),
        ("kv_cache", _vp), ("kv_dtype", _i32), ("kv_scale", _f32),
        ("kv_stride_slot", _i64), ("num_slots", _i64),
        ("qo_indptr", _vp), ("kv_indptr", _vp), ("kv_indices", _vp), ("index_dtype", _i32),
        ("tail_source", _i32), ("tail_kv", _vp), ("tail_kv_stride", _i64),
        ("mask_kind", _i32), ("reserved1", _i32), ("mask", _vp), ("mask_indptr", _vp),
        ("mask_row_bytes", _i64),
        ("out", _vp), ("out_dtype", _i32), ("reserved2", _i32),
        ("out_stride_token", _i64), ("out_stride_head", _i64),
        ("lse", _vp), ("error_flag", _vp),
    ]


class KdtreeError(RuntimeError):
    pass


class KdtreeLib:
    """The library under test: the few entry points the benchmark calls."""

    def __init__(self, path: str):
        self.path = str(Path(path).resolve())
        # The bindings load a library when first imported, found through this
        # variable: make it this file (dlopen of one path twice gives one
        # handle). A later KdtreeLib on another file (bench.py --compare-lib)
        # takes a handle of its own from kdtree_kernels.load_library.
        if "kdtree_kernels" not in sys.modules:
            os.environ["KDTREE_KERNELS_LIB"] = self.path
        self._cdll = ctypes.CDLL(self.path)
        c = self._cdll
        c.kdtree_last_error_message.restype = ctypes.c_char_p
        c.kdtree_last_error_message.argtypes = []
        c.kdtree_build_info.restype = ctypes.c_char_p
        c.kdtree_build_info.argtypes = []
        c.kdtree_struct_size.restype = _i32
        c.kdtree_struct_size.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t)]
        c.kdtree_prepare.restype = _i32
        c.kdtree_prepare.argtypes = [_i32]

        self.Params, self._fns, self.binding = self._bind()
        expected = self.struct_size("kdtree_verify_paged_params")
        if ctypes.sizeof(self.Params) != expected:
            raise KdtreeError(
                f"kdtree_verify_paged_params is {expected} bytes in {self.path} but "
                f"{ctypes.sizeof(self.Params)} in the ctypes mirror ({self.binding})")

    def _bind(self):
        """(Params class, {name: function}, description) from the bindings package
        if it imports against this library and mirrors every field used here, else
        from the private mirror."""
        names = ("kdtree_verify_paged_params_init", "kdtree_verify_workspace_size",
                 "kdtree_verify_paged")
        why = ""
        bindings = REPO / "bindings" / "python"
        if bindings.is_dir() and str(bindings) not in sys.path:
            sys.path.insert(0, str(bindings))
        try:
            import kdtree_kernels as kk  # noqa: E402  (path set just above)
            params = kk.VerifyPagedParams
            theirs = [f[0] for f in params._fields_]
            ours = [f[0] for f in _VerifyPagedParams._fields_]
            if theirs != ours:
                raise ImportError(f"its VerifyPagedParams fields differ: {theirs}")
            handle, how = kk.lib, "bindings/python kdtree_kernels"
            if Path(kk.lib.path).resolve() != Path(self.path):
                handle, how = kk.load_library(self.path), how + ", a handle of its own"
            # The package's functions raise KDTreeError with the C message.
            return params, {n: getattr(handle, n) for n in names}, how
        except Exception as e:  # any failure: fall back, and say why
            why = f"{type(e).__name__}: {e}".splitlines()[0]

        p = ctypes.POINTER(_VerifyPagedParams)
        fns = {}
        for name, argtypes in (
                ("kdtree_verify_paged_params_init", [p]),
                ("kdtree_verify_workspace_size", [p, ctypes.POINTER(ctypes.c_size_t)]),
                ("kdtree_verify_paged", [p, _vp, ctypes.c_size_t, _vp])):
            fn = getattr(self._cdll, name)
            fn.restype = _i32
            fn.argtypes = argtypes
            fn.errcheck = self._errcheck
            fns[name] = fn
        return _VerifyPagedParams, fns, f"private ctypes mirror (bindings not used: {why})"

    def _errcheck(self, result, func, args):
        if result != 0:
            raise KdtreeError(f"{func.__name__} returned {result}: {self.last_error()}")
        return result

    def last_error(self) -> str:
        msg = self._cdll.kdtree_last_error_message()
        return msg.decode() if msg else ""

    def build_info(self) -> str:
        info = self._cdll.kdtree_build_info()
        return info.decode() if info else ""

    def struct_size(self, name: str) -> int:
        size = ctypes.c_size_t()
        rc = self._cdll.kdtree_struct_size(name.encode(), ctypes.byref(size))
        if rc != 0:
            raise KdtreeError(f"kdtree_struct_size({name}) returned {rc}: {self.last_error()}")
        return size.value

    def prepare(self, device: int) -> None:
        rc = self._cdll.kdtree_prepare(device)
        if rc != 0:
            raise KdtreeError(f"kdtree_prepare({device}) returned {rc}: {self.last_error()}")

    def new_params(self):
        params = self.Params()
        self._fns["kdtree_verify_paged_params_init"](ctypes.byref(params))
        return params

    def workspace_size(self, params) -> int:
        size = ctypes.c_size_t()
        self._fns["kdtree_verify_workspace_size"](ctypes.byref(params), ctypes.byref(size))
        return size.value

    def verify(self, params_ref, workspace: int, workspace_bytes: int, stream: int) -> None:
        self._fns["kdtree_verify_paged"](params_ref, workspace, workspace_bytes, stream)


class OursRunner:
    """One configured kdtree_verify_paged call on one InputSet: TAIL_FROM_INDICES,
    TREE_DENSE mask, int32 indices, bf16 out, f32 lse, an error flag; the KV
    cache bf16 or fp8 e4m3 (kv_scale 1) as the InputSet holds it."""

    def __init__(self, lib: KdtreeLib, inp: InputSet, num_splits: int = 0):
        case = inp.case
        self.lib, self.inp, self.num_splits = lib, inp, num_splits
        dev = inp.q.device
        self.out = torch.empty(case.total_q, case.heads, 512, device=dev, dtype=torch.bfloat16)
        self.lse = torch.empty(case.total_q, case.heads, device=dev, dtype=torch.float32)
        self.error_flag = torch.zeros(1, device=dev, dtype=torch.int32)

        p = lib.new_params()
        p.batch_size = case.batch
        p.num_heads = case.heads
        p.head_dim_latent = 512
        p.head_dim_rope = 64
        p.max_q_len = case.max_q_len
        p.total_q = case.total_q
        p.max_kv_len = case.max_kv_len
        p.num_splits = num_splits
        p.sm_scale = inp.sm_scale
        p.q = inp.q.data_ptr()
        p.q_dtype = KDTREE_DTYPE_BF16
        p.q_stride_token = inp.q.stride(0)
        p.q_stride_head = inp.q.stride(1)
        p.kv_cache = inp.kv_pool.data_ptr()
        p.kv_dtype = KDTREE_DTYPE_FP8_E4M3 if case.kv_dtype == "fp8" else KDTREE_DTYPE_BF16
        p.kv_scale = 1.0
        p.kv_stride_slot = inp.kv_pool.stride(0)
        p.num_slots = inp.kv_pool.shape[0]
        p.qo_indptr = inp.qo_indptr.data_ptr()
        p.kv_indptr = inp.kv_indptr.data_ptr()
        p.kv_indices = inp.kv_indices.data_ptr()
        p.index_dtype = KDTREE_DTYPE_INT32
        p.tail_source = KDTREE_TAIL_FROM_INDICES
        p.mask_kind = KDTREE_MASK_TREE_DENSE
        p.mask = inp.tree_dense.data_ptr()
        p.mask_indptr = inp.tree_dense_indptr.data_ptr()
        p.out = self.out.data_ptr()
        p.out_dtype = KDTREE_DTYPE_BF16
        p.out_stride_token = self.out.stride(0)
        p.out_stride_head = self.out.stride(1)
        p.lse = self.lse.data_ptr()
        p.error_flag = self.error_flag.data_ptr()
        self.params = p
        self._params_ref = ctypes.byref(p)
        self.workspace_bytes = lib.workspace_size(p)
        self._workspace: Optional[torch.Tensor] = None

    def bind_workspace(self, workspace: torch.Tensor) -> None:
        if workspace.numel() < self.workspace_bytes:
            raise KdtreeError(f"workspace of {workspace.numel()} B < {self.workspace_bytes} B")
        self._workspace = workspace

    def __call__(self) -> None:
        ws = self._workspace
        self.lib.verify(self._params_ref, ws.data_ptr() if ws is not None and ws.numel() else None,
                        self.workspace_bytes, torch.cuda.current_stream().cuda_stream)

    def poison(self) -> None:
        """NaN outputs and a cleared flag before a checked call: an element the
        kernel does not write fails the check."""
        self.out.fill_(float("nan"))
        self.lse.fill_(float("nan"))
        self.error_flag.zero_()
