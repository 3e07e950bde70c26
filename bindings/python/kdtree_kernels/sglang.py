"""SGLang adapter: the target-verify attention of MLA models through kdtree_verify_paged.

``verify_extend_mla`` takes exactly the tensors SGLang's Triton backend hands
``extend_attention_fwd`` in a target-verify forward of an MLA model (DeepSeek-V3,
Kimi-K2):

  q_extend    [T, H, 576]   the draft tokens' queries (bf16/fp16)
  k_extend    [T, 1, 576]   the draft tokens' keys (the tail; MLA: v = k[..., :512])
  k_buffer    [N, 1, 576]   the layer's KV pool (v_buffer is its first 512 columns):
                            q's dtype, or float8_e4m3fn (an fp8 KV cache)
  qo_indptr   [B+1] int32/int64, kv_indptr [B+1] int32 (prefix only), kv_indices int64/int32
  custom_mask flat uint8, SGLang's full rows (prefix columns + tree), mask_indptr [B+1] int64

and computes with TAIL_FROM_EXTEND and MASK_SGLANG_FULL (MASK_CAUSAL when
custom_mask is None, as SGLang's kernel does). With an fp8 pool the 16-bit
k_extend is rounded to e4m3 first (the ABI's tail has the cache's dtype), as
set_kv_buffer has just stored the same tokens: the draft tokens' keys are the
values a later decode reads from the cache. Scratch (the split-K workspace,
int32 copies of int64 indptrs, the fp8 tail) lives in a per-device cache that
only grows, so a CUDA-graph replay allocates nothing; ``reserve`` sizes it
ahead of capture.

When ``sglang`` is importable, ``KDTreeTritonAttnBackend`` subclasses SGLang's
``TritonAttnBackend`` and routes only the target-verify extend of MLA layers
here; it is registered as attention backend "kdtree" when SGLang has
``register_attention_backend``. With ``KDTREE_SGLANG_SHADOW=N`` it computes both,
returns Triton's result and logs the max abs / relative difference for the first
N eager calls. (With an fp8 pool SGLang's kernel rounds q and P to fp8 for its
dots, so the differences there are mostly its rounding.)
"""

import importlib.util
import inspect
import logging
import os
import threading

from . import _structs as s
from ._arrays import torch_dtype_code
from ._lib import lib
from .api import HEAD_DIM_LATENT, HEAD_DIM_ROPE, verify_paged, verify_workspace_size

logger = logging.getLogger(__name__)

HEAD_DIM = HEAD_DIM_LATENT + HEAD_DIM_ROPE
MAX_Q_LEN = 128


def _torch():
    import torch

    return torch


class _ScratchCache:
    """Per-device scratch that only grows: a workspace byte buffer and an int32
    indptr buffer. Growth allocates (eager or at capture time, from torch's
    allocator); a replay reuses the captured addresses."""

    def __init__(self):
        self._lock = threading.Lock()
        self._bufs = {}

    def get(self, kind, device, numel, dtype):
        key = (kind, device.index if device.index is not None else 0)
        with self._lock:
            buf = self._bufs.get(key)
            if buf is None or buf.numel() < numel:
                buf = _torch().empty(max(numel, 1), dtype=dtype, device=device)
                self._bufs[key] = buf
            return buf


_scratch = _ScratchCache()


def _host_params(batch_size, num_heads, max_q_len, max_kv_len, total_q, num_splits=0,
                 q_dtype=None, kv_dtype=None):
    """The parameters kdtree_verify_workspace_size sizes the largest call by,
    for reserve(), which has no tensors (the tile configuration, and with it
    the split count, depends on the KV dtype). A dtype that is None or not
    the library's (an e5m2 pool, whose calls stay with Triton) counts as q's,
    and q's as bf16."""
    def code(dtype, default):
        c = torch_dtype_code(dtype) if dtype is not None else None
        return default if c is None else c

    p = s.VerifyPagedParams()
    lib.kdtree_verify_paged_params_init(p)
    p.batch_size, p.num_heads, p.max_q_len = batch_size, num_heads, max_q_len
    p.total_q, p.max_kv_len, p.num_splits = total_q, max_kv_len, num_splits
    p.q_dtype = p.out_dtype = code(q_dtype, s.DTYPE_BF16)
    p.kv_dtype = code(kv_dtype, p.q_dtype)
    return p


def reserve(device, max_batch_size, num_heads, max_q_len, max_kv_len, num_splits=0,
            q_dtype=None, kv_dtype=None):
    """Grows the workspace cache of `device` to the largest call expected (call it
    before CUDA-graph capture so capture and replay never allocate). The dtypes
    are the model's and the pool's (bf16 when None); an fp8 pool's calls take a
    larger workspace and an fp8 copy of the tail."""
    import ctypes

    torch = _torch()
    device = torch.device(device)
    with torch.cuda.device(device):
        p = _host_params(max_batch_size, num_heads, max_q_len, max_kv_len,
                         max_batch_size * max_q_len, num_splits, q_dtype, kv_dtype)
        size = ctypes.c_size_t()
        lib.kdtree_verify_workspace_size(p, ctypes.byref(size))
    _scratch.get("workspace", device, size.value, torch.uint8)
    _scratch.get("qo_indptr", device, max_batch_size + 1, torch.int32)
    _scratch.get("kv_indptr", device, max_batch_size + 1, torch.int32)
    if kv_dtype == torch.float8_e4m3fn:
        _scratch.get("tail_fp8", device, max_batch_size * max_q_len * HEAD_DIM, kv_dtype)


def verify_extend_mla(q_extend, k_extend, k_buffer, qo_indptr, kv_indptr, kv_indices,
                      custom_mask, mask_indptr, sm_scale, o_extend=None, lse=None, *,
                      max_len_extend=None, max_kv_len=None, kv_scale=1.0, num_splits=0,
                      error_flag=None):
    """SGLang target-verify attention of an MLA layer; returns o_extend [T, H, 512].

    max_len_extend: the host bound on draft tokens per request (SGLang's
    max_extend_len = num_draft_tokens); by default T when T <= 128, else
    T / B (SGLang's target-verify batches are uniform). max_kv_len: host hint
    for the split count; by default len(kv_indices) + max_len_extend (pass the
    context length under CUDA graphs, where kv_indices is the whole buffer).
    """
    torch = _torch()
    device = q_extend.device
    total_q, num_heads = int(q_extend.shape[0]), int(q_extend.shape[1])
    batch_size = int(qo_indptr.shape[0]) - 1
    if o_extend is None:
        o_extend = q_extend.new_empty((total_q, num_heads, HEAD_DIM_LATENT))
    if max_len_extend is None:
        if total_q <= MAX_Q_LEN or batch_size <= 0:
            max_len_extend = max(min(total_q, MAX_Q_LEN), 1)
        else:
            max_len_extend = -(-total_q // batch_size)
    if qo_indptr.dtype != torch.int32:
        # SGLang's CUDA-graph buffer is int64; the ABI takes int32. The copy is
        # a stream-ordered kernel into cached memory: capture-safe.
        buf = _scratch.get("qo_indptr", device, batch_size + 1, torch.int32)[:batch_size + 1]
        buf.copy_(qo_indptr)
        qo_indptr = buf
    if kv_indptr.dtype != torch.int32:
        buf = _scratch.get("kv_indptr", device, batch_size + 1, torch.int32)[:batch_size + 1]
        buf.copy_(kv_indptr)
        kv_indptr = buf
    if max_kv_len is None:
        max_kv_len = int(kv_indices.shape[0]) + max_len_extend
    if k_buffer.dtype == torch.float8_e4m3fn and k_extend.dtype != k_buffer.dtype:
        # The same rounding as the pool's set_kv_buffer (a cast), into cached
        # memory: stream-ordered and capture-safe.
        buf = _scratch.get("tail_fp8", device, total_q * HEAD_DIM, k_buffer.dtype)
        tail = buf[:total_q * HEAD_DIM].view(total_q, 1, HEAD_DIM)
        tail.copy_(k_extend.view(total_q, 1, HEAD_DIM))
        k_extend = tail
    if custom_mask is None:
        mask_kind, custom_mask, mask_indptr = s.MASK_CAUSAL, None, None
    else:
        mask_kind = s.MASK_SGLANG_FULL

    arrays = (q_extend, k_buffer, qo_indptr, kv_indptr, kv_indices, o_extend)
    call = dict(sm_scale=sm_scale, max_q_len=max_len_extend, max_kv_len=max_kv_len,
                num_splits=num_splits, lse=lse, tail_kv=k_extend,
                tail_source=s.TAIL_FROM_EXTEND, mask=custom_mask, mask_indptr=mask_indptr,
                mask_kind=mask_kind, kv_scale=kv_scale, error_flag=error_flag)
    with torch.cuda.device(device):
        # Sized from the call's own arguments (dtypes included), then cached.
        size = verify_workspace_size(*arrays, **call)
        workspace = _scratch.get("workspace", device, size, torch.uint8)
        verify_paged(*arrays, workspace=workspace, stream=torch.cuda.current_stream(device),
                     **call)
    return o_extend


def _shadow_budget():
    try:
        return max(int(os.environ.get("KDTREE_SGLANG_SHADOW", "0")), 0)
    except ValueError:
        return 0


def _relative_diff(ours, theirs):
    """(max |a-b|, ||a-b|| / ||b||) in float32."""
    a, b = ours.float(), theirs.float()
    diff = (a - b)
    return float(diff.abs().max()), float(diff.norm() / b.norm().clamp_min(1e-30))


if importlib.util.find_spec("sglang") is not None:
    try:
        from sglang.srt.layers.attention.triton_backend import TritonAttnBackend
    except Exception as e:  # an SGLang without the Triton backend (or its deps)
        logger.debug("kdtree_kernels.sglang: no TritonAttnBackend (%s)", e)
        TritonAttnBackend = None
else:
    TritonAttnBackend = None


if TritonAttnBackend is not None:

    class KDTreeTritonAttnBackend(TritonAttnBackend):
        """SGLang's Triton backend with the target-verify extend of MLA layers
        computed by kdtree_verify_paged, with a 16-bit or an fp8 e4m3 KV pool
        (unscaled: layer.k_scale None). Every other path (prefill, decode,
        draft extend, non-MLA, fp8 e5m2 or scaled KV, sliding window, soft
        cap, sinks, deterministic mode) is the parent's, unchanged.

        The parent's forward_extend still runs (it saves the draft tokens' KV
        and picks the metadata); only its call of extend_attention_fwd is
        routed, by binding the arguments against that function's own
        signature, so SGLang versions that reorder or add parameters still
        reach the right tensors.
        """

        def __init__(self, model_runner, *args, **kwargs):
            super().__init__(model_runner, *args, **kwargs)
            self._kdtree_shadow_left = _shadow_budget()
            self._kdtree_dtypes = (getattr(model_runner, "dtype", None),
                                   getattr(model_runner, "kv_cache_dtype", None))

        def init_cuda_graph_state(self, max_bs, max_num_tokens, *args, **kwargs):
            super().init_cuda_graph_state(max_bs, max_num_tokens, *args, **kwargs)
            if self.use_mla and self.num_draft_tokens:
                reserve(self.device, max_bs, self.num_head, int(self.num_draft_tokens),
                        int(self.max_context_len) + int(self.num_draft_tokens),
                        q_dtype=self._kdtree_dtypes[0], kv_dtype=self._kdtree_dtypes[1])

        def _kdtree_fits(self, layer, forward_batch):
            return (self.use_mla
                    and forward_batch.forward_mode.is_target_verify()
                    and not getattr(self, "enable_deterministic", False)
                    and layer.qk_head_dim == HEAD_DIM
                    and layer.v_head_dim == HEAD_DIM_LATENT
                    and getattr(layer, "k_scale", None) is None
                    and (getattr(layer, "sliding_window_size", None) is None
                         or layer.sliding_window_size <= -1)
                    and not getattr(layer, "logit_cap", 0))

        def forward_extend(self, q, k, v, layer, forward_batch, save_kv_cache=True,
                           *args, **kwargs):
            if not self._kdtree_fits(layer, forward_batch):
                return super().forward_extend(q, k, v, layer, forward_batch, save_kv_cache,
                                              *args, **kwargs)
            triton_fn = self.extend_attention_fwd
            self.extend_attention_fwd = _RoutedExtend(self, triton_fn)
            try:
                return super().forward_extend(q, k, v, layer, forward_batch, save_kv_cache,
                                              *args, **kwargs)
            finally:
                self.extend_attention_fwd = triton_fn

    class _RoutedExtend:
        """Stands in for extend_attention_fwd during one target-verify call."""

        def __init__(self, backend, triton_fn):
            self.backend = backend
            self.triton_fn = triton_fn
            self.signature = inspect.signature(inspect.unwrap(triton_fn))

        def __call__(self, *args, **kwargs):
            bound = self.signature.bind(*args, **kwargs)
            bound.apply_defaults()
            a = bound.arguments
            q, k_extend, k_buffer = a["q_extend"], a["k_extend"], a["k_buffer"]
            torch = _torch()
            unsupported = (
                (a.get("sinks") is not None)
                or (a.get("logit_cap") or 0) > 0
                or (a.get("sliding_window_size", -1) or -1) > -1
                or any(a.get(n) not in (None, 1.0) for n in ("k_scale", "v_scale"))
                or k_buffer.dtype not in (q.dtype, torch.float8_e4m3fn)
                or k_extend.dtype not in (q.dtype, k_buffer.dtype)
                or q.dtype not in (torch.bfloat16, torch.float16)
                or (a.get("custom_mask") is None and not a.get("is_causal", True)))
            if unsupported:
                return self.triton_fn(*args, **kwargs)
            sm_scale = a.get("sm_scale") or q.shape[-1] ** -0.5
            call = dict(qo_indptr=a["qo_indptr"], kv_indptr=a["kv_indptr"],
                        kv_indices=a["kv_indices"], custom_mask=a.get("custom_mask"),
                        mask_indptr=a.get("mask_indptr"), sm_scale=sm_scale,
                        max_len_extend=int(a["max_len_extend"]),
                        max_kv_len=int(self.backend.max_context_len)
                        + int(a["max_len_extend"]))
            o = a["o_extend"]
            b = self.backend
            if b._kdtree_shadow_left > 0 and not torch.cuda.is_current_stream_capturing():
                b._kdtree_shadow_left -= 1
                self.triton_fn(*args, **kwargs)
                ours = verify_extend_mla(q, k_extend, k_buffer, o_extend=torch.empty_like(o),
                                         **call)
                max_abs, rel = _relative_diff(ours, o)
                logger.info("kdtree shadow: max abs diff %.3e, relative %.3e "
                            "(T=%d, H=%d, %d calls left)", max_abs, rel, q.shape[0],
                            q.shape[1], b._kdtree_shadow_left)
                return o
            verify_extend_mla(q, k_extend, k_buffer, o_extend=o, **call)
            return o

    try:
        from sglang.srt.layers.attention.attention_registry import register_attention_backend
    except ImportError:  # older SGLang: construct KDTreeTritonAttnBackend yourself
        register_attention_backend = None

    if register_attention_backend is not None:

        @register_attention_backend("kdtree")
        def create_kdtree_backend(runner):
            return KDTreeTritonAttnBackend(runner)
