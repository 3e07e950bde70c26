"""Which calls KDTreeTritonAttnBackend routes to kdtree_verify_paged and which it
leaves to SGLang's Triton kernel, against a stand-in SGLang: the modules the
adapter imports, a TritonAttnBackend whose forward_extend calls
extend_attention_fwd with SGLang 0.5's arguments, and an attention registry.
The routed call is recorded, not run, so this needs torch but no GPU (skipped
without torch).
"""

import importlib
import importlib.machinery
import sys
import types
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

D, DL = 576, 512


def extend_attention_fwd(q_extend, k_extend, v_extend, o_extend, k_buffer, v_buffer,
                         qo_indptr, kv_indptr, kv_indices, custom_mask, is_causal,
                         mask_indptr, max_len_extend, k_scale, v_scale, sm_scale=None,
                         logit_cap=0.0, skip_prefix_custom_mask=True, sliding_window_size=-1,
                         sinks=None, window_kv_offsets=None, xai_temperature_len=-1):
    """SGLang 0.5.10's signature (triton_ops/extend_attention.py); records its call."""
    o_extend.fill_(1.0)
    extend_attention_fwd.calls += 1


class TritonAttnBackend:
    """The parts of SGLang's TritonAttnBackend the adapter touches."""

    def __init__(self, model_runner):
        self.use_mla = True
        self.device = "cpu"
        self.num_head = 2
        self.num_draft_tokens = 4
        self.max_context_len = 1000
        self.enable_deterministic = False
        self.extend_attention_fwd = extend_attention_fwd

    def forward_extend(self, q, k, v, layer, forward_batch, save_kv_cache=True, sinks=None):
        # As SGLang's: o in the layer's v_head_dim, then the kernel call with
        # positional tensors and keyword options.
        o = q.new_empty((q.shape[0], layer.tp_q_head_num * layer.v_head_dim))
        m = forward_batch.metadata
        kb = forward_batch.k_buffer
        self.extend_attention_fwd(
            q.view(-1, layer.tp_q_head_num, layer.qk_head_dim), k.contiguous(), v.contiguous(),
            o.view(-1, layer.tp_q_head_num, layer.v_head_dim), kb, kb[..., :DL],
            m["qo_indptr"], m["kv_indptr"], m["kv_indices"], m["custom_mask"],
            m["causal"], m["mask_indptr"], m["max_extend_len"], 1.0, 1.0, layer.scaling,
            logit_cap=layer.logit_cap, sliding_window_size=layer.sliding_window_size,
            sinks=sinks, window_kv_offsets=None, xai_temperature_len=-1)
        return o


def fake_sglang(registered):
    """sys.modules entries standing in for the SGLang packages the adapter imports."""
    names = ["sglang", "sglang.srt", "sglang.srt.layers", "sglang.srt.layers.attention",
             "sglang.srt.layers.attention.triton_backend",
             "sglang.srt.layers.attention.attention_registry"]
    mods = {}
    for name in names:
        mod = types.ModuleType(name)
        mod.__spec__ = importlib.machinery.ModuleSpec(name, loader=None, is_package=True)
        mod.__path__ = []
        mods[name] = mod
    mods["sglang.srt.layers.attention.triton_backend"].TritonAttnBackend = TritonAttnBackend

    def register_attention_backend(name):
        def wrap(factory):
            registered[name] = factory
            return factory
        return wrap

    mods["sglang.srt.layers.attention.attention_registry"].register_attention_backend = (
        register_attention_backend)
    return mods


@pytest.fixture
def adapter(monkeypatch):
    """kdtree_kernels.sglang imported against the stand-in SGLang, its
    verify_extend_mla replaced by a recorder; yields (module, registry, calls)."""
    registered, calls = {}, []
    for name, mod in fake_sglang(registered).items():
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.delitem(sys.modules, "kdtree_kernels.sglang", raising=False)
    module = importlib.import_module("kdtree_kernels.sglang")

    def record(q, k_extend, k_buffer, o_extend=None, **kw):
        calls.append(dict(kw, q=q, k_extend=k_extend, k_buffer=k_buffer, o_extend=o_extend))
        o_extend.fill_(2.0)
        return o_extend

    monkeypatch.setattr(module, "verify_extend_mla", record)
    extend_attention_fwd.calls = 0
    yield module, registered, calls
    sys.modules.pop("kdtree_kernels.sglang", None)


def layer(**kw):
    base = dict(qk_head_dim=D, v_head_dim=DL, tp_q_head_num=2, k_scale=None,
                sliding_window_size=-1, logit_cap=0.0, scaling=0.07)
    base.update(kw)
    return SimpleNamespace(**base)


def batch(pool_dtype=torch.bfloat16, target_verify=True, causal=True, with_mask=True):
    t, n = 4, 12
    mode = SimpleNamespace(is_target_verify=lambda: target_verify)
    meta = dict(qo_indptr=torch.tensor([0, t], dtype=torch.int32),
                kv_indptr=torch.tensor([0, 5], dtype=torch.int32),
                kv_indices=torch.arange(1, 6, dtype=torch.int64),
                custom_mask=torch.ones(t * (5 + t), dtype=torch.uint8) if with_mask else None,
                causal=causal, mask_indptr=torch.tensor([0, t * (5 + t)], dtype=torch.int64),
                max_extend_len=t)
    return SimpleNamespace(forward_mode=mode, metadata=meta,
                           k_buffer=torch.zeros((n, 1, D)).to(pool_dtype))


def run(module, lay, fb, sinks=None, q_dtype=torch.bfloat16):
    runner = SimpleNamespace(dtype=q_dtype, kv_cache_dtype=fb.k_buffer.dtype)
    backend = module.KDTreeTritonAttnBackend(runner)
    t = 4
    q = torch.zeros((t, lay.tp_q_head_num * D), dtype=q_dtype)
    k = torch.zeros((t, 1, D), dtype=q_dtype)
    o = backend.forward_extend(q, k, k[..., :DL], lay, fb, sinks=sinks)
    assert backend.extend_attention_fwd is extend_attention_fwd  # restored after the call
    return o


def test_registered_as_kdtree(adapter):
    module, registered, _ = adapter
    assert registered["kdtree"] is module.create_kdtree_backend


@pytest.mark.parametrize("pool_dtype", ["bfloat16", "float8_e4m3fn"])
def test_target_verify_of_an_mla_layer_is_routed(adapter, pool_dtype):
    module, _, calls = adapter
    fb = batch(getattr(torch, pool_dtype))
    o = run(module, layer(), fb)
    assert extend_attention_fwd.calls == 0 and len(calls) == 1
    call = calls[0]
    assert call["k_buffer"] is fb.k_buffer
    assert call["sm_scale"] == 0.07 and call["max_len_extend"] == 4
    assert call["max_kv_len"] == 1000 + 4  # the context length: safe under CUDA graphs
    assert call["custom_mask"] is fb.metadata["custom_mask"]
    assert call["o_extend"].shape == (4, 2, DL)
    assert bool((o == 2.0).all())  # the parent's o, written by the routed call


def test_float16_model_is_routed(adapter):
    module, _, calls = adapter
    run(module, layer(), batch(torch.float16), q_dtype=torch.float16)
    assert len(calls) == 1 and extend_attention_fwd.calls == 0


@pytest.mark.parametrize("case", [
    "e5m2 pool", "scaled fp8 pool", "not target verify", "soft cap", "sliding window",
    "sinks", "not causal, no mask", "not MLA head dims", "pool dtype differs from q"])
def test_what_stays_with_triton(adapter, case):
    module, _, calls = adapter
    lay, fb, sinks, q_dtype = layer(), batch(), None, torch.bfloat16
    if case == "e5m2 pool":
        fb = batch(torch.float8_e5m2)
    elif case == "scaled fp8 pool":
        fb, lay = batch(torch.float8_e4m3fn), layer(k_scale=0.5)
    elif case == "not target verify":
        fb = batch(target_verify=False)
    elif case == "soft cap":
        lay = layer(logit_cap=30.0)
    elif case == "sliding window":
        lay = layer(sliding_window_size=128)
    elif case == "sinks":
        sinks = torch.zeros(2)
    elif case == "not causal, no mask":
        fb = batch(causal=False, with_mask=False)
    elif case == "not MLA head dims":
        lay = layer(qk_head_dim=128, v_head_dim=128)
    elif case == "pool dtype differs from q":
        fb, q_dtype = batch(torch.bfloat16), torch.float16
    if case == "not MLA head dims":
        # The stand-in's views need 576-wide q; only the routing decision is checked.
        backend = module.KDTreeTritonAttnBackend(SimpleNamespace(dtype=q_dtype,
                                                                 kv_cache_dtype=None))
        assert not backend._kdtree_fits(lay, fb)
        return
    o = run(module, lay, fb, sinks=sinks, q_dtype=q_dtype)
    assert len(calls) == 0 and extend_attention_fwd.calls == 1
    assert bool((o == 1.0).all())
