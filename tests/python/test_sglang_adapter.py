"""kdtree_kernels.sglang.verify_extend_mla on inputs built the way SGLang's Triton
backend builds them for a target-verify forward of an MLA model, against the
library's CPU reference (and SGLang's own extend_attention_fwd when importable:
an installed sglang, or a wheel carried as .whl/sglang-*.whl, loaded by the
benchmark's loader in bench/peers.py). Needs torch with CUDA; skipped otherwise.
"""

import inspect
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device", allow_module_level=True)

import kdtree_kernels as kk  # noqa: E402
from kdtree_kernels.sglang import verify_extend_mla  # noqa: E402

D, DL = 576, 512
TOLERANCE = 5e-3
REPO = Path(__file__).resolve().parents[2]


def sglang_extend_attention_fwd():
    """SGLang's Triton extend_attention_fwd, loaded as the benchmark loads it
    (bench/peers.py): the installed package, else the carried wheel with only
    the kernel file imported and sglang.srt.utils / environ stubbed (the real
    ones pull in the whole serving stack). Skips the test when neither works."""
    bench = str(REPO / "bench")
    sys.path.insert(0, bench)
    try:
        from peers import load_sglang_extend_attention
    finally:
        sys.path.remove(bench)
    extend_attention_fwd, how = load_sglang_extend_attention()
    if extend_attention_fwd is None:
        pytest.skip(f"SGLang's extend_attention_fwd: {how}")
    return extend_attention_fwd


def random_tree(gen, n):
    """Ancestor mask of a random draft tree (each node's parent is earlier)."""
    m = torch.zeros((n, n), dtype=torch.bool)
    for i in range(n):
        m[i, i] = True
        if i:
            m[i] |= m[int(torch.randint(0, i, (1,), generator=gen))]
    return m


def sglang_target_verify_inputs(seq_lens, num_draft, heads, seed=0, device="cuda"):
    """What TritonAttnBackend.init_forward_metadata(target_verify) and
    forward_extend hand extend_attention_fwd: kv_indices over each request's
    prefix (seq_lens), the draft tokens' keys in k_extend (also written to the
    pool at out_cache_loc), custom_mask with full rows (prefix ones + tree),
    mask_indptr = cumsum(num_draft * (seq_len + num_draft))."""
    gen = torch.Generator().manual_seed(seed)
    bs = len(seq_lens)
    total_q = bs * num_draft
    pool = sum(seq_lens) + total_q + 17
    perm = torch.randperm(pool - 1, generator=gen) + 1  # slot 0 is SGLang's reserved slot
    prefix_slots, out_cache_loc = perm[:sum(seq_lens)], perm[sum(seq_lens):][:total_q]
    k_buffer = (torch.randn((pool, 1, D), generator=gen) * 0.5).to(torch.bfloat16)
    k_extend = (torch.randn((total_q, 1, D), generator=gen) * 0.5).to(torch.bfloat16)
    k_buffer[out_cache_loc] = k_extend  # set_kv_buffer before the attention call
    q = (torch.randn((total_q, heads, D), generator=gen) * 0.5).to(torch.bfloat16)
    qo_indptr = torch.arange(0, (bs + 1) * num_draft, num_draft, dtype=torch.int32)
    kv_indptr = torch.zeros(bs + 1, dtype=torch.int32)
    kv_indptr[1:] = torch.cumsum(torch.tensor(seq_lens), 0)
    trees = [random_tree(gen, num_draft) for _ in seq_lens]
    rows = [torch.cat([torch.ones((num_draft, p), dtype=torch.bool), t], 1)
            for p, t in zip(seq_lens, trees)]
    custom_mask = torch.cat([r.flatten() for r in rows]).to(torch.uint8)
    mask_indptr = torch.zeros(bs + 1, dtype=torch.int64)
    mask_indptr[1:] = torch.cumsum(torch.tensor([num_draft * (p + num_draft)
                                                 for p in seq_lens]), 0)
    t = dict(q_extend=q, k_extend=k_extend, k_buffer=k_buffer, qo_indptr=qo_indptr,
             kv_indptr=kv_indptr, kv_indices=prefix_slots.to(torch.int64),
             custom_mask=custom_mask, mask_indptr=mask_indptr)
    return {k: v.to(device) for k, v in t.items()}


def bf16_bits(t):
    return t.detach().cpu().view(torch.int16).numpy().view(np.uint16)


def fp8_bytes(t):
    return t.detach().cpu().view(torch.uint8).numpy()


def host_reference(inp, sm_scale):
    """The CPU reference; with an fp8 pool, over the tail rounded to fp8 as
    SGLang's set_kv_buffer stores it."""
    q, kb, tail = inp["q_extend"], inp["k_buffer"], inp["k_extend"]
    if kb.dtype == torch.float8_e4m3fn:
        kv_bits, tail_bits = fp8_bytes(kb), fp8_bytes(tail.to(kb.dtype))
        kv_dtype = kk.DTYPE_FP8_E4M3
    else:
        kv_bits, tail_bits, kv_dtype = bf16_bits(kb), bf16_bits(tail), kk.DTYPE_BF16
    out = np.zeros((q.shape[0], q.shape[1], DL), np.float32)
    kk.verify_paged_host(
        bf16_bits(q), kv_bits, inp["qo_indptr"].cpu().numpy(),
        inp["kv_indptr"].cpu().numpy(), inp["kv_indices"].cpu().numpy(), out,
        sm_scale=sm_scale, max_q_len=int(inp["qo_indptr"][1] - inp["qo_indptr"][0]),
        tail_kv=tail_bits, mask=inp["custom_mask"].cpu().numpy(),
        mask_indptr=inp["mask_indptr"].cpu().numpy(), mask_kind=kk.MASK_SGLANG_FULL,
        q_dtype=kk.DTYPE_BF16, kv_dtype=kv_dtype)
    return torch.from_numpy(out)


def relative_error(got, want):
    got, want = got.float().cpu(), want.float().cpu()
    assert not torch.isnan(got).any()
    return float((got - want).norm() / want.norm())


SHAPES = [([37, 300, 5], 8, 16), ([1024], 16, 8), ([0, 64], 4, 1)]


@pytest.mark.parametrize("seq_lens,num_draft,heads", SHAPES)
def test_adapter_matches_host_reference(seq_lens, num_draft, heads):
    inp = sglang_target_verify_inputs(seq_lens, num_draft, heads)
    sm_scale = D ** -0.5
    out = verify_extend_mla(**inp, sm_scale=sm_scale)
    torch.cuda.synchronize()
    assert out.shape == (len(seq_lens) * num_draft, heads, DL)
    assert relative_error(out, host_reference(inp, sm_scale)) <= TOLERANCE


@pytest.mark.parametrize("seq_lens,num_draft,heads", SHAPES[:2])
def test_fp8_pool_with_a_16_bit_tail(seq_lens, num_draft, heads):
    """An fp8 e4m3 pool (SGLang's --kv-cache-dtype fp8_e4m3) and the bf16
    k_extend SGLang hands the kernel: the tail rounded to fp8 like the pool."""
    inp = sglang_target_verify_inputs(seq_lens, num_draft, heads, seed=6)
    inp["k_buffer"] = inp["k_buffer"].to(torch.float8_e4m3fn)
    sm_scale = D ** -0.5
    out = verify_extend_mla(**inp, sm_scale=sm_scale)
    torch.cuda.synchronize()
    assert relative_error(out, host_reference(inp, sm_scale)) <= TOLERANCE
    # The same as handing it the tail already in fp8.
    same = verify_extend_mla(**dict(inp, k_extend=inp["k_extend"].to(torch.float8_e4m3fn)),
                             sm_scale=sm_scale)
    torch.cuda.synchronize()
    assert torch.equal(out, same)


@pytest.mark.parametrize("pool_dtype", ["bfloat16", "float8_e4m3fn"])
def test_reserve_sizes_every_scratch_buffer(pool_dtype, monkeypatch):
    """After reserve() for the largest call, such a call (int64 indptrs, as
    SGLang's CUDA-graph buffers) allocates nothing: what capture needs."""
    import kdtree_kernels.sglang as adapter

    monkeypatch.setattr(adapter, "_scratch", adapter._ScratchCache())
    heads, num_draft, prefix = 16, 8, 3000
    inp = sglang_target_verify_inputs([prefix, 5, 700], num_draft, heads, seed=7)
    inp["k_buffer"] = inp["k_buffer"].to(getattr(torch, pool_dtype))
    inp["qo_indptr"] = inp["qo_indptr"].to(torch.int64)
    inp["kv_indptr"] = inp["kv_indptr"].to(torch.int64)
    adapter.reserve("cuda", 3, heads, num_draft, prefix + num_draft,
                    q_dtype=torch.bfloat16, kv_dtype=inp["k_buffer"].dtype)
    before = {k: b.data_ptr() for k, b in adapter._scratch._bufs.items()}
    out = verify_extend_mla(**inp, sm_scale=0.05, max_len_extend=num_draft,
                            max_kv_len=prefix + num_draft)
    torch.cuda.synchronize()
    assert {k: b.data_ptr() for k, b in adapter._scratch._bufs.items()} == before
    as_int32 = {k: inp[k].to(torch.int32) for k in ("qo_indptr", "kv_indptr")}
    assert relative_error(out, host_reference(dict(inp, **as_int32), 0.05)) <= TOLERANCE


def test_int64_qo_indptr_of_the_cuda_graph_buffers():
    inp = sglang_target_verify_inputs([50, 9], 8, 16, seed=1)
    want = verify_extend_mla(**inp, sm_scale=0.05)
    inp["qo_indptr"] = inp["qo_indptr"].to(torch.int64)
    got = verify_extend_mla(**inp, sm_scale=0.05)
    torch.cuda.synchronize()
    assert torch.equal(got, want)


def test_on_a_non_default_stream():
    inp = sglang_target_verify_inputs([200, 33, 1], 8, 16, seed=2)
    want = verify_extend_mla(**inp, sm_scale=0.04)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = torch.empty_like(want)
        verify_extend_mla(**inp, sm_scale=0.04, o_extend=out)
    side.synchronize()
    assert torch.equal(out, want)


@pytest.mark.parametrize("pool_dtype", ["bfloat16", "float8_e4m3fn"])
def test_cuda_graph_replay_with_new_lengths(pool_dtype):
    """Captured once over fixed buffers (as SGLang's cuda_graph_* buffers), replayed
    after refilling them with other lengths: equals an eager call on the new data
    (with an fp8 pool, the tail's rounding is captured too)."""
    heads, num_draft, max_prefix = 16, 8, 400
    first = sglang_target_verify_inputs([100, 40], num_draft, heads, seed=3)
    second = sglang_target_verify_inputs([max_prefix, 7], num_draft, heads, seed=4)
    for inp in (first, second):
        inp["k_buffer"] = inp["k_buffer"].to(getattr(torch, pool_dtype))
    sizes = dict(q_extend=(2 * num_draft, heads, D), k_extend=(2 * num_draft, 1, D),
                 k_buffer=(2 * max_prefix + 2 * num_draft + 17, 1, D), qo_indptr=(3,),
                 kv_indptr=(3,), kv_indices=(2 * max_prefix,),
                 custom_mask=(2 * num_draft * (max_prefix + num_draft),), mask_indptr=(3,))
    bufs = {k: torch.zeros(v, dtype=first[k].dtype, device="cuda") for k, v in sizes.items()}

    def load(inp):
        for k, v in inp.items():
            bufs[k].view(-1)[:v.numel()].copy_(v.view(-1))

    out = torch.empty((2 * num_draft, heads, DL), dtype=torch.bfloat16, device="cuda")
    call = dict(bufs, sm_scale=0.05, o_extend=out, max_len_extend=num_draft,
                max_kv_len=max_prefix + num_draft)
    load(first)
    verify_extend_mla(**call)  # warm-up: sizes the scratch cache outside capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        verify_extend_mla(**call)
    load(second)
    graph.replay()
    eager = verify_extend_mla(**second, sm_scale=0.05, max_len_extend=num_draft,
                              max_kv_len=max_prefix + num_draft)
    torch.cuda.synchronize()
    assert torch.equal(out, eager)


def test_matches_sglang_extend_attention_fwd():
    extend_attention_fwd = sglang_extend_attention_fwd()
    inp = sglang_target_verify_inputs([129, 2048], 8, 16, seed=5)
    sm_scale = D ** -0.5
    q = inp["q_extend"]
    o_triton = torch.empty((q.shape[0], q.shape[1], DL), dtype=q.dtype, device=q.device)
    kw = dict(q_extend=q, k_extend=inp["k_extend"], v_extend=inp["k_extend"][..., :DL],
              o_extend=o_triton, k_buffer=inp["k_buffer"],
              v_buffer=inp["k_buffer"][..., :DL], qo_indptr=inp["qo_indptr"],
              kv_indptr=inp["kv_indptr"], kv_indices=inp["kv_indices"],
              custom_mask=inp["custom_mask"], is_causal=True, mask_indptr=inp["mask_indptr"],
              max_len_extend=8, sm_scale=sm_scale, k_scale=1.0, v_scale=1.0)
    params = inspect.signature(extend_attention_fwd).parameters
    extend_attention_fwd(**{k: v for k, v in kw.items() if k in params})
    ours = verify_extend_mla(**inp, sm_scale=sm_scale)
    torch.cuda.synchronize()
    assert relative_error(ours, o_triton) <= TOLERANCE
