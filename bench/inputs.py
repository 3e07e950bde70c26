"""GPU inputs of one shape and the fp32 reference every implementation is checked against.

An InputSet is one full set of device tensors for a Case (shapes.py): a KV pool
of num_slots rows of 576 in the Case's kv_dtype, bf16 or fp8 e4m3 (random normal
rounded to it; the one slack row no index refers
to holds NaN, so a kernel that reads a slot it was not given leaks NaN into its
output and fails the check), the fragmented kv_indices (prefix then tail per
request, TAIL_FROM_INDICES), q [T, H, 576] random normal, and the TREE_DENSE
mask. Several sets of one Case share its lengths and trees (hence its floor)
and differ in data and slot permutation; the benchmark rotates over them where
one set would sit in L2.
"""

from dataclasses import dataclass
from typing import List, Optional

import numpy as np
import torch

from shapes import HEAD_DIM, HEAD_DIM_LATENT, SM_SCALE, Case, random_slots


@dataclass
class InputSet:
    case: Case
    kv_pool: torch.Tensor          # [num_slots, 576] bf16 or float8_e4m3fn (case.kv_dtype)
    kv_indices_host: np.ndarray    # [total_kv] int32
    kv_indices: torch.Tensor       # [total_kv] int32, device
    slack_slot: int
    q: torch.Tensor                # [T, H, 576] bf16
    qo_indptr: torch.Tensor        # [B+1] int32
    kv_indptr: torch.Tensor        # [B+1] int32 (prefix + tail)
    tree_dense: torch.Tensor       # uint8 TREE_DENSE bytes
    tree_dense_indptr: torch.Tensor  # [B+1] int64

    @property
    def sm_scale(self) -> float:
        return SM_SCALE

    def prefix_slots(self, b: int) -> np.ndarray:
        start = int(self.case.kv_indptr[b])
        return self.kv_indices_host[start:start + int(self.case.prefix_lens[b])]

    def tail_slots(self, b: int) -> np.ndarray:
        start = int(self.case.kv_indptr[b]) + int(self.case.prefix_lens[b])
        return self.kv_indices_host[start:int(self.case.kv_indptr[b + 1])]


def make_input_set(case: Case, set_index: int, device: torch.device) -> InputSet:
    seed = case.seed * 1000 + set_index + 1
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    kv_pool = torch.randn(case.num_slots, HEAD_DIM, generator=gen, device=device,
                          dtype=torch.float32)
    kv_indices_host, slack = random_slots(case, seed)
    kv_pool[slack] = float("nan")  # before the rounding: e4m3fn keeps NaN, not inf
    kv_pool = kv_pool.to(torch.float8_e4m3fn if case.kv_dtype == "fp8" else torch.bfloat16)
    q = torch.randn(case.total_q, case.heads, HEAD_DIM, generator=gen, device=device,
                    dtype=torch.float32).to(torch.bfloat16)

    def dev(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a)).to(device)

    return InputSet(case=case, kv_pool=kv_pool, kv_indices_host=kv_indices_host,
                    kv_indices=dev(kv_indices_host), slack_slot=slack, q=q,
                    qo_indptr=dev(case.qo_indptr), kv_indptr=dev(case.kv_indptr),
                    tree_dense=dev(case.tree_dense),
                    tree_dense_indptr=dev(case.tree_dense_indptr))


def causal_masks(case: Case) -> List[np.ndarray]:
    """The causal tail of FlashMLA / FlashInfer (row i sees tail keys j <= i)."""
    return [np.tril(np.ones((int(q), int(q)), dtype=np.uint8)) for q in case.q_lens]


@torch.no_grad()
def reference(inp: InputSet, masks: Optional[List[np.ndarray]] = None):
    """fp32 attention per request (bf16 / fp8 inputs upcast exactly, no TF32): out [T, H, 512]
    f32 and lse [T, H] f32 (natural log). `masks` overrides the tree masks (the
    causal reference of the causal-tail peers)."""
    case = inp.case
    masks = case.masks if masks is None else masks
    H = case.heads
    out = torch.empty(case.total_q, H, HEAD_DIM_LATENT, device=inp.q.device,
                      dtype=torch.float32)
    lse = torch.empty(case.total_q, H, device=inp.q.device, dtype=torch.float32)
    saved_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for b in range(case.batch):
            r0, r1 = int(case.qo_indptr[b]), int(case.qo_indptr[b + 1])
            k0, k1 = int(case.kv_indptr[b]), int(case.kv_indptr[b + 1])
            prefix = int(case.prefix_lens[b])
            # The rows gathered as bytes (indexing works for every dtype that way).
            pool = inp.kv_pool
            keys = pool.view(torch.uint8)[inp.kv_indices[k0:k1].long()].view(pool.dtype).float()  # [L, 576]
            qb = inp.q[r0:r1].float().reshape(-1, HEAD_DIM)                # [(i,h), 576]
            scores = (qb @ keys.T).mul_(inp.sm_scale).view(r1 - r0, H, k1 - k0)
            hidden = torch.from_numpy(masks[b] == 0).to(scores.device)   # [q, q]
            scores[:, :, prefix:].masked_fill_(hidden[:, None, :], float("-inf"))
            row_lse = torch.logsumexp(scores, dim=-1)                      # [q, H]
            probs = torch.exp(scores - row_lse[..., None])
            out[r0:r1] = (probs.view(-1, k1 - k0) @ keys[:, :HEAD_DIM_LATENT]).view(
                r1 - r0, H, HEAD_DIM_LATENT)
            lse[r0:r1] = row_lse
            del keys, scores, probs
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved_tf32
    return out, lse


def rel_frobenius(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in fp64; NaN anywhere gives NaN (never passes)."""
    diff = (out.double() - ref.double()).norm()
    return float(diff / ref.double().norm())


def lse_max_abs(lse: torch.Tensor, ref: torch.Tensor) -> float:
    return float((lse.double() - ref.double()).abs().max())
