"""The peers ours is measured against, on the same inputs (SPEC section 6).

- torch:    gather + bmm verify in PyTorch, batched over requests (padded).
- triton:   SGLang's Triton `extend_attention_fwd` with its custom mask
            (SGLANG_FULL layout, TAIL_FROM_EXTEND), as SGLang runs tree verify.
- flashmla: FlashMLA `flash_mla_with_kvcache` with a causal tail (no tree mask
            exists there), 64-row pages, as the SPEC's Hopper bar measured it.
- flashinfer: FlashInfer's MLA paged wrapper with a causal tail (it rejects
            custom masks), page size 1.

Each peer is built from an InputSet outside the timed region (the per-step
metadata an engine prepares once for all layers: padded indices, masks, block
tables) and then called with no host work beyond its launches. A peer that
cannot be imported or fails says so in `reason`; the benchmark goes on.
"""

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import math
import sys
import tempfile
import types
import zipfile
from pathlib import Path
from typing import Callable, List, Optional, Tuple

import numpy as np
import torch

from inputs import InputSet, causal_masks
from shapes import HEAD_DIM, HEAD_DIM_LATENT, HEAD_DIM_ROPE

REPO = Path(__file__).resolve().parent.parent


class Peer:
    name = "peer"
    tree_mask = True      # False: a causal tail, checked against the causal reference
    budget_ms = 300.0     # timing budget per shape
    min_iters, max_iters = 5, 50

    def __init__(self, inp: InputSet):
        self.inp = inp
        self.out: Optional[torch.Tensor] = None
        self.lse: Optional[torch.Tensor] = None

    def __call__(self) -> None:
        raise NotImplementedError

    def reference_masks(self) -> Optional[List[np.ndarray]]:
        return None if self.tree_mask else causal_masks(self.inp.case)


# --------------------------------------------------------------------------- #
# PyTorch                                                                     #
# --------------------------------------------------------------------------- #

def _bmm_f32_out_supported(device) -> bool:
    """torch.bmm(bf16, bf16, out_dtype=torch.float32): fp32 scores straight from
    the GEMM's fp32 accumulator (PyTorch >= 2.8 on CUDA)."""
    try:
        a = torch.randn(1, 16, 16, device=device, dtype=torch.bfloat16)
        torch.bmm(a, a, out_dtype=torch.float32)
        return True
    except (TypeError, RuntimeError):
        return False


class TorchPeer(Peer):
    """Gather every request's keys into a padded [B, L, 576] batch, one bmm for
    the scores of all (row, head) pairs, the mask as an additive bias, fp32
    softmax (and its lse), one bmm with the values. Requires one q_len per batch
    (true of every shape); ragged kv lengths are padded with each request's first
    key and hidden by the bias."""

    name = "torch"
    min_iters, max_iters = 3, 30

    def __init__(self, inp: InputSet):
        super().__init__(inp)
        case = inp.case
        if len(set(int(q) for q in case.q_lens)) != 1:
            raise ValueError("torch peer: needs one q_len for the whole batch")
        self.q_len = int(case.q_lens[0])
        B, H, L = case.batch, case.heads, case.max_kv_len
        idx = np.empty((B, L), dtype=np.int64)
        bias = np.zeros((B, self.q_len, L), dtype=np.float32)
        for b in range(B):
            k0, k1 = int(case.kv_indptr[b]), int(case.kv_indptr[b + 1])
            n, prefix = k1 - k0, int(case.prefix_lens[b])
            idx[b, :n] = inp.kv_indices_host[k0:k1]
            idx[b, n:] = inp.kv_indices_host[k0]
            bias[b, :, prefix:prefix + self.q_len][case.masks[b] == 0] = -math.inf
            bias[b, :, n:] = -math.inf
        dev = inp.q.device
        self.idx = torch.from_numpy(idx).to(dev)
        self.bias = torch.from_numpy(bias).to(dev).view(B, self.q_len, 1, L)
        self.fp32_scores = _bmm_f32_out_supported(dev)
        self.note = "" if self.fp32_scores else "bf16 scores (no bmm out_dtype)"
        self.B, self.H, self.L = B, H, L

    def __call__(self) -> None:
        B, H, L, qn = self.B, self.H, self.L, self.q_len
        keys = self.inp.kv_pool[self.idx]                         # [B, L, 576] gather
        rows = self.inp.q.view(B, qn * H, HEAD_DIM)                # rows (i, h) per request
        if self.fp32_scores:
            scores = torch.bmm(rows, keys.transpose(1, 2), out_dtype=torch.float32)
        else:
            scores = torch.bmm(rows, keys.transpose(1, 2)).float()
        scores = scores.view(B, qn, H, L)
        torch.add(self.bias, scores, alpha=self.inp.sm_scale, out=scores)  # scale + mask, one pass
        lse = torch.logsumexp(scores, dim=-1)                      # [B, qn, H]
        probs = torch.softmax(scores, dim=-1).to(torch.bfloat16)
        out = torch.bmm(probs.view(B, qn * H, L), keys[:, :, :HEAD_DIM_LATENT])
        self.out = out.view(B * qn, H, HEAD_DIM_LATENT)
        self.lse = lse.view(B * qn, H)


# --------------------------------------------------------------------------- #
# SGLang Triton extend_attention_fwd                                          #
# --------------------------------------------------------------------------- #

# Where the kernel lives: sglang <= 0.5.x, then the kernels/ops layout.
SGLANG_EXTEND_MODULES = (
    "sglang.srt.layers.attention.triton_ops.extend_attention",
    "sglang.kernels.ops.attention.extend_attention",
)


def _sglang_stub_modules() -> dict:
    """The two sglang modules the Triton kernel files import for platform
    queries and environment flags; importing the real ones pulls in the whole
    serving stack. Stubs answer as a CUDA (not ROCm) machine with no flags set."""
    utils = types.ModuleType("sglang.srt.utils")

    def is_cuda():
        return torch.cuda.is_available() and torch.version.hip is None

    def is_hip():
        return torch.version.hip is not None

    utils.is_cuda = is_cuda
    utils.is_hip = is_hip
    utils.is_cuda_alike = lambda: is_cuda() or is_hip()
    utils.is_gfx95_supported = lambda: False
    utils.is_gfx1250_supported = lambda: False
    utils.get_device_core_count = (
        lambda device_id=0: torch.cuda.get_device_properties(device_id).multi_processor_count)
    utils.get_device_capability = (
        lambda device_id=0: torch.cuda.get_device_capability(device_id))
    utils.get_bool_env_var = lambda name, default="false": (
        __import__("os").environ.get(name, default).lower() in ("1", "true"))

    def utils_getattr(name):
        if name.startswith("is_"):  # is_npu, is_cpu, is_xpu, ...: not this machine
            return lambda *a, **k: False
        raise AttributeError(f"sglang.srt.utils stub has no {name}")

    utils.__getattr__ = utils_getattr

    environ = types.ModuleType("sglang.srt.environ")

    class _Flag:
        def __init__(self, name):
            self.name = name

        def get(self):
            return False

        def is_set(self):
            return False

    class _Envs:
        def __getattr__(self, name):
            return _Flag(name)

    environ.envs = _Envs()
    return {"sglang.srt.utils": utils, "sglang.srt.environ": environ}


class _SglangFinder(importlib.abc.MetaPathFinder):
    """Imports `sglang.*` from the installed package directory without running
    any package __init__.py (packages become empty namespaces), with the stub
    modules above in place of sglang.srt.utils / sglang.srt.environ."""

    def __init__(self, package_dir: Path, stubs: dict):
        self.root = package_dir.parent
        self.stubs = stubs

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "sglang" and not fullname.startswith("sglang."):
            return None
        if fullname in self.stubs:
            return importlib.util.spec_from_loader(fullname, _ModuleLoader(self.stubs[fullname]))
        base = self.root.joinpath(*fullname.split("."))
        if base.is_dir():
            spec = importlib.machinery.ModuleSpec(fullname, _ModuleLoader(None), is_package=True)
            spec.submodule_search_locations = [str(base)]
            return spec
        file = base.with_suffix(".py")
        if file.is_file():
            return importlib.util.spec_from_file_location(fullname, file)
        return None


class _ModuleLoader(importlib.abc.Loader):
    def __init__(self, module: Optional[types.ModuleType]):
        self.module = module

    def create_module(self, spec):
        return self.module  # None: the default (an empty module)

    def exec_module(self, module):
        pass


def _sglang_package_dir() -> Optional[Path]:
    try:
        spec = importlib.util.find_spec("sglang")  # locates, does not execute
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    for entry in sys.path:
        candidate = Path(entry or ".") / "sglang"
        if (candidate / "__init__.py").is_file():
            return candidate
    return _sglang_from_carried_wheel()


def _sglang_from_carried_wheel() -> Optional[Path]:
    """A wheel carried as <repo>/.whl/sglang-*.whl: unzip its Python files to a
    temporary directory (only the kernel files are imported, so no install and
    none of its dependencies are needed)."""
    wheels = sorted((REPO / ".whl").glob("sglang-*.whl"))
    if not wheels:
        return None
    target = Path(tempfile.gettempdir()) / "kdtree_bench_sglang" / wheels[-1].stem
    if not (target / "sglang" / "__init__.py").is_file():
        with zipfile.ZipFile(wheels[-1]) as wheel:
            wheel.extractall(target, [n for n in wheel.namelist()
                                      if n.startswith("sglang/") and n.endswith(".py")])
    return target / "sglang"


def load_sglang_extend_attention() -> Tuple[Optional[Callable], str]:
    """(extend_attention_fwd, how it was loaded) or (None, why not)."""
    errors = []
    for name in SGLANG_EXTEND_MODULES:
        try:
            module = importlib.import_module(name)
            return module.extend_attention_fwd, f"import {name}"
        except Exception as e:  # ImportError or anything its heavy imports raise
            errors.append(f"{name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    package_dir = _sglang_package_dir()
    if package_dir is None:
        return None, "sglang not installed"
    for name in SGLANG_EXTEND_MODULES:
        if not package_dir.parent.joinpath(*name.split(".")).with_suffix(".py").is_file():
            continue
        # Forget the half-imported real package before importing through the stubs.
        for key in [k for k in sys.modules if k == "sglang" or k.startswith("sglang.")]:
            del sys.modules[key]
        finder = _SglangFinder(package_dir, _sglang_stub_modules())
        sys.meta_path.insert(0, finder)
        try:
            module = importlib.import_module(name)
            return (module.extend_attention_fwd,
                    f"{name} from {package_dir} with sglang.srt.utils/environ stubbed")
        except Exception as e:
            sys.meta_path.remove(finder)
            errors.append(f"stubbed {name}: {type(e).__name__}: {e}")
    return None, "not importable: " + " | ".join(errors)


class TritonPeer(Peer):
    """SGLang's target-verify call of `extend_attention_fwd` for absorbed MLA:
    kv_indices over the prefix only (int64, as SGLang's Triton backend keeps
    them), the draft tokens' keys as k_extend [T, 1, 576] with v_extend its first
    512 columns, k_buffer [N, 1, 576] with v_buffer the view k_buffer[..., :512],
    a bool custom mask per request [q, prefix + q] with mask_indptr (int64),
    is_causal False, logit_cap 0."""

    name = "triton"
    budget_ms = 150.0
    min_iters, max_iters = 3, 8
    _loaded: Optional[Tuple[Optional[Callable], str]] = None  # loaded once per process

    @classmethod
    def load(cls) -> Tuple[Optional[Callable], str]:
        if cls._loaded is None:
            cls._loaded = load_sglang_extend_attention()
        return cls._loaded

    def __init__(self, inp: InputSet):
        super().__init__(inp)
        self.fn, self.how = self.load()
        if self.fn is None:
            raise ImportError(self.how)
        case = inp.case
        dev = inp.q.device
        prefix_slots = np.concatenate([inp.prefix_slots(b) for b in range(case.batch)])
        tail_slots = np.concatenate([inp.tail_slots(b) for b in range(case.batch)])
        self.kv_indices = torch.from_numpy(prefix_slots.astype(np.int64)).to(dev)
        self.kv_indptr = torch.from_numpy(case.prefix_indptr).to(dev)
        self.qo_indptr = inp.qo_indptr
        self.k_buffer = inp.kv_pool.view(-1, 1, HEAD_DIM)
        self.v_buffer = self.k_buffer[:, :, :HEAD_DIM_LATENT]
        tail = torch.from_numpy(tail_slots.astype(np.int64)).to(dev)
        self.k_extend = inp.kv_pool[tail].view(-1, 1, HEAD_DIM).contiguous()
        self.v_extend = self.k_extend[:, :, :HEAD_DIM_LATENT]
        full, full_indptr = case.sglang_full_mask()
        self.custom_mask = torch.from_numpy(full != 0).to(dev)
        self.mask_indptr = torch.from_numpy(full_indptr).to(dev)
        self.out = torch.empty(case.total_q, case.heads, HEAD_DIM_LATENT, device=dev,
                               dtype=torch.bfloat16)
        self.lse = torch.empty(case.total_q, case.heads, device=dev, dtype=torch.float32)

        wanted = dict(
            q_extend=inp.q, k_extend=self.k_extend, v_extend=self.v_extend, o_extend=self.out,
            k_buffer=self.k_buffer, v_buffer=self.v_buffer, qo_indptr=self.qo_indptr,
            kv_indptr=self.kv_indptr, kv_indices=self.kv_indices,
            custom_mask=self.custom_mask, is_causal=False, mask_indptr=self.mask_indptr,
            max_len_extend=case.max_q_len, k_scale=1.0, v_scale=1.0,
            sm_scale=inp.sm_scale, logit_cap=0.0, skip_prefix_custom_mask=True,
            lse_extend=self.lse)
        params = inspect.signature(self.fn).parameters
        self.kwargs = {k: v for k, v in wanted.items() if k in params}
        missing = [k for k, p in params.items()
                   if p.default is inspect.Parameter.empty and k not in self.kwargs]
        if missing:
            raise RuntimeError(f"extend_attention_fwd wants {missing}, which this peer does not know")
        if "lse_extend" not in self.kwargs:
            self.lse = None  # older SGLang: no lse output

    def __call__(self) -> None:
        self.fn(**self.kwargs)


# --------------------------------------------------------------------------- #
# FlashMLA and FlashInfer (causal tail)                                       #
# --------------------------------------------------------------------------- #

class FlashMLAPeer(Peer):
    """flash_mla_with_kvcache on a paged copy of each request's rows (prefix and
    tail, 64-row pages in a random block order), causal tail."""

    name = "flashmla"
    tree_mask = False
    min_iters, max_iters = 10, 200
    PAGE = 64

    def __init__(self, inp: InputSet):
        super().__init__(inp)
        from flash_mla import flash_mla_with_kvcache, get_mla_metadata  # ImportError: not importable
        self.fn = flash_mla_with_kvcache
        case = inp.case
        dev = inp.q.device
        B, H, qn = case.batch, case.heads, int(case.q_lens[0])
        if len(set(int(q) for q in case.q_lens)) != 1:
            raise ValueError("flashmla peer: needs one q_len for the whole batch")
        kv_lens = (case.prefix_lens + case.q_lens).astype(np.int64)
        blocks = [int(-(-n // self.PAGE)) for n in kv_lens]
        order = np.random.default_rng(case.seed + 7).permutation(sum(blocks))
        table = np.zeros((B, max(blocks)), dtype=np.int32)
        cache = torch.empty(sum(blocks), self.PAGE, 1, HEAD_DIM, device=dev, dtype=torch.bfloat16)
        cache.normal_()
        start = 0
        for b in range(B):
            ids = order[start:start + blocks[b]]
            start += blocks[b]
            table[b, :blocks[b]] = ids
            k0, k1 = int(case.kv_indptr[b]), int(case.kv_indptr[b + 1])
            slots = torch.from_numpy(inp.kv_indices_host[k0:k1].astype(np.int64)).to(dev)
            rows = inp.kv_pool[slots]
            padded = torch.zeros(blocks[b] * self.PAGE, HEAD_DIM, device=dev, dtype=torch.bfloat16)
            padded[:k1 - k0] = rows
            cache[torch.from_numpy(ids.astype(np.int64)).to(dev)] = padded.view(
                blocks[b], self.PAGE, 1, HEAD_DIM)
        self.cache = cache
        self.block_table = torch.from_numpy(table).to(dev)
        self.cache_seqlens = torch.from_numpy(kv_lens.astype(np.int32)).to(dev)
        self.q4 = inp.q.view(B, qn, H, HEAD_DIM)
        self.meta, self.splits = get_mla_metadata(self.cache_seqlens, qn * H, 1)
        self.B, self.H, self.qn = B, H, qn

    def __call__(self) -> None:
        out, lse = self.fn(self.q4, self.cache, self.block_table, self.cache_seqlens,
                           HEAD_DIM_LATENT, self.meta, self.splits,
                           softmax_scale=self.inp.sm_scale, causal=True)
        self.out = out.reshape(self.B * self.qn, self.H, HEAD_DIM_LATENT)
        # lse comes back [B, H, qn]
        self.lse = lse.permute(0, 2, 1).reshape(self.B * self.qn, self.H)


class FlashInferPeer(Peer):
    """FlashInfer BatchMLAPagedAttentionWrapper, page size 1 over the same
    fragmented slots, causal tail (its MLA path takes no custom mask)."""

    name = "flashinfer"
    tree_mask = False
    min_iters, max_iters = 10, 200

    def __init__(self, inp: InputSet):
        super().__init__(inp)
        from flashinfer.mla import BatchMLAPagedAttentionWrapper  # ImportError: not importable
        case = inp.case
        dev = inp.q.device
        self.workspace = torch.empty(128 << 20, device=dev, dtype=torch.uint8)
        self.wrapper = BatchMLAPagedAttentionWrapper(self.workspace)
        self.ckv = inp.kv_pool[:, :HEAD_DIM_LATENT].contiguous().view(-1, 1, HEAD_DIM_LATENT)
        self.kpe = inp.kv_pool[:, HEAD_DIM_LATENT:].contiguous().view(-1, 1, HEAD_DIM_ROPE)
        self.q_nope = inp.q[:, :, :HEAD_DIM_LATENT].contiguous()
        self.q_pe = inp.q[:, :, HEAD_DIM_LATENT:].contiguous()
        kv_lens = torch.from_numpy((case.prefix_lens + case.q_lens).astype(np.int32)).to(dev)
        self.wrapper.plan(inp.qo_indptr, inp.kv_indptr, inp.kv_indices, kv_lens,
                          case.heads, HEAD_DIM_LATENT, HEAD_DIM_ROPE, 1, True,
                          inp.sm_scale, torch.bfloat16, torch.bfloat16)

    def __call__(self) -> None:
        self.out, self.lse = self.wrapper.run(self.q_nope, self.q_pe, self.ckv, self.kpe,
                                              return_lse=True)


PEERS = (TorchPeer, TritonPeer, FlashMLAPeer, FlashInferPeer)
PEER_NAMES = tuple(p.name for p in PEERS)
