"""The benchmark's shape table (SPEC section 6) and each shape's metadata and floor.

Everything here is numpy only, so `bench.py --dry-run` runs on a machine without
a GPU: the random trees, the masks in the two layouts the benchmark passes
(TREE_DENSE for ours, SGLANG_FULL for SGLang's Triton kernel), the fragmented
slot assignment, the exact count of visible keys, and the floor
max(bytes / BW, flops / MMA).
"""

import math
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

import numpy as np

HEAD_DIM_LATENT = 512          # D_L: latent / value dims
HEAD_DIM_ROPE = 64             # D_R
HEAD_DIM = HEAD_DIM_LATENT + HEAD_DIM_ROPE  # D = 576
# KV cache element types the benchmark can run (--kv-dtype) and their bytes; the
# query and output stay bf16. fp8 is e4m3 with kv_scale 1 (SPEC section 2).
KV_DTYPE_BYTES = {"bf16": 2, "fp8": 1}
SM_SCALE = 1.0 / math.sqrt(192.0)  # DeepSeek-V3's softmax scale (qk_head_dim 192)

# SPEC section 6; ceilings measured on an H200 of this workplace. Used only when
# the benchmark cannot measure them (dry run, nvcc missing).
NOMINAL_BW_BYTES_PER_S = 4.27e12
NOMINAL_MMA_FLOP_PER_S = 647e12
# FlashMLA on the same shapes with a causal tail, SPEC section 6 (ms only for S8).
FLASHMLA_SPEC_EFFICIENCY = {"S1": 0.905, "S2": 0.920, "S3": 0.933, "S4": 0.940,
                            "S5": 1.036, "S6": 1.031, "S7": 0.875, "S8": 0.369}
FLASHMLA_SPEC_S8_MS = 0.0385


@dataclass(frozen=True)
class Shape:
    id: str
    batch: int        # B requests
    heads: int        # H query heads per rank
    q_len: int        # draft tokens per request
    prefix: int       # P prefix keys per request
    stands_for: str


SHAPES: List[Shape] = [
    Shape("S1", 1, 16, 16, 131072, "DeepSeek-V3 TP8, one long-context EAGLE tree"),
    Shape("S2", 8, 16, 16, 16384, "DeepSeek-V3 TP8, a serving batch"),
    Shape("S3", 4, 8, 16, 131072, "Kimi-K2 TP8, long context"),
    Shape("S4", 32, 16, 8, 16384, "wide batch, small trees"),
    Shape("S5", 1, 16, 64, 131072, "DDTree with a large node budget"),
    Shape("S6", 8, 128, 16, 16384, "TP1, all heads"),
    Shape("S7", 64, 16, 8, 4096, "many short requests"),
    Shape("S8", 8, 16, 16, 2048, "short context: launch and merge overhead show"),
]
SHAPES_BY_ID: Dict[str, Shape] = {s.id: s for s in SHAPES}


def random_tree_parents(rng: np.random.Generator, q_len: int) -> np.ndarray:
    """Node 0 is the root (the verified token); each later node's parent is a
    uniformly random earlier node. parents[0] = -1."""
    parents = np.full(q_len, -1, dtype=np.int64)
    for i in range(1, q_len):
        parents[i] = rng.integers(0, i)
    return parents


def tree_mask(parents: np.ndarray) -> np.ndarray:
    """[q, q] uint8: row i sees column j iff j is an ancestor of i or i itself."""
    q_len = parents.shape[0]
    mask = np.zeros((q_len, q_len), dtype=np.uint8)
    for i in range(q_len):
        # parents[i] < i, so row parents[i] is complete before row i.
        if parents[i] >= 0:
            mask[i] = mask[parents[i]]
        mask[i, i] = 1
    return mask


@dataclass
class Case:
    """One shape's inputs on the host: lengths, trees, masks and slots. The GPU
    side turns these into tensors; the same Case is shared by every rotated input
    set so that all of them have the same floor."""

    shape: Shape
    q_lens: np.ndarray          # [B] int64
    prefix_lens: np.ndarray     # [B] int64
    qo_indptr: np.ndarray       # [B+1] int32
    kv_indptr: np.ndarray       # [B+1] int32, TAIL_FROM_INDICES: prefix + tail
    prefix_indptr: np.ndarray   # [B+1] int32, TAIL_FROM_EXTEND: prefix only
    masks: List[np.ndarray]     # per request [q_b, q_b] uint8 tree masks
    tree_dense: np.ndarray      # concatenated TREE_DENSE bytes
    tree_dense_indptr: np.ndarray  # [B+1] int64 byte offsets
    visible_per_row: np.ndarray  # [T] keys visible to each query row (prefix + ancestors-or-self)
    num_slots: int              # prefix + tail rows of every request, plus one slack slot
    seed: int
    contiguous_slots: bool = False  # each request's keys in consecutive slots (random_slots)
    kv_dtype: str = "bf16"        # the KV cache's element type (KV_DTYPE_BYTES)
    extras: Dict[str, object] = field(default_factory=dict)

    @property
    def batch(self) -> int:
        return self.shape.batch

    @property
    def heads(self) -> int:
        return self.shape.heads

    @property
    def total_q(self) -> int:
        return int(self.qo_indptr[-1])

    @property
    def total_kv(self) -> int:
        return int(self.kv_indptr[-1])

    @property
    def max_q_len(self) -> int:
        return int(self.q_lens.max())

    @property
    def max_kv_len(self) -> int:
        return int((self.prefix_lens + self.q_lens).max())

    def sglang_full_mask(self) -> Tuple[np.ndarray, np.ndarray]:
        """SGLANG_FULL layout: per request a [q_b, prefix_b + q_b] uint8 matrix,
        prefix columns ones, tail columns the tree. Returns (bytes, int64 indptr)."""
        parts, indptr = [], [0]
        for b in range(self.batch):
            p, q = int(self.prefix_lens[b]), int(self.q_lens[b])
            full = np.ones((q, p + q), dtype=np.uint8)
            full[:, p:] = self.masks[b]
            parts.append(full.reshape(-1))
            indptr.append(indptr[-1] + full.size)
        return np.concatenate(parts), np.asarray(indptr, dtype=np.int64)


def build_case(shape: Shape, seed: int = 0, contiguous_slots: bool = False,
               kv_dtype: str = "bf16") -> Case:
    if kv_dtype not in KV_DTYPE_BYTES:
        raise ValueError(f"kv_dtype {kv_dtype!r}: expected one of {sorted(KV_DTYPE_BYTES)}")
    rng = np.random.default_rng(seed)
    B = shape.batch
    q_lens = np.full(B, shape.q_len, dtype=np.int64)
    prefix_lens = np.full(B, shape.prefix, dtype=np.int64)
    kv_lens = prefix_lens + q_lens

    qo_indptr = np.zeros(B + 1, dtype=np.int32)
    qo_indptr[1:] = np.cumsum(q_lens)
    kv_indptr = np.zeros(B + 1, dtype=np.int32)
    kv_indptr[1:] = np.cumsum(kv_lens)
    prefix_indptr = np.zeros(B + 1, dtype=np.int32)
    prefix_indptr[1:] = np.cumsum(prefix_lens)

    masks = [tree_mask(random_tree_parents(rng, int(q))) for q in q_lens]
    tree_dense = np.concatenate([m.reshape(-1) for m in masks])
    tree_dense_indptr = np.zeros(B + 1, dtype=np.int64)
    tree_dense_indptr[1:] = np.cumsum([m.size for m in masks])

    visible = np.concatenate([prefix_lens[b] + masks[b].sum(axis=1, dtype=np.int64)
                              for b in range(B)])
    return Case(shape=shape, q_lens=q_lens, prefix_lens=prefix_lens, qo_indptr=qo_indptr,
                kv_indptr=kv_indptr, prefix_indptr=prefix_indptr, masks=masks,
                tree_dense=tree_dense, tree_dense_indptr=tree_dense_indptr,
                visible_per_row=visible, num_slots=int(kv_lens.sum()) + 1, seed=seed,
                contiguous_slots=contiguous_slots, kv_dtype=kv_dtype)


def random_slots(case: Case, seed: int) -> Tuple[np.ndarray, int]:
    """A fragmented page_size-1 cache: the requests' keys (prefix then tail, per
    request) take a random permutation of the pool; with case.contiguous_slots
    (bench.py --contiguous-slots, a diagnostic: the same kernel over an
    unfragmented cache) they take the pool in order. Returns (kv_indices int32
    [total_kv], the one slack slot no index refers to)."""
    if case.contiguous_slots:
        perm = np.arange(case.num_slots)
    else:
        perm = np.random.default_rng(seed).permutation(case.num_slots)
    return perm[:case.total_kv].astype(np.int32), int(perm[case.total_kv])


@dataclass(frozen=True)
class Floor:
    bytes: int
    flops: int
    visible_keys: int       # sum over query rows of visible keys (one head)
    bw_s: float             # bytes / BW
    mma_s: float            # flops / MMA
    floor_s: float
    bound: str              # "memory" or "compute"

    @property
    def floor_ms(self) -> float:
        return self.floor_s * 1e3


def traffic_bytes(case: Case) -> int:
    """Each KV row (prefix and tail), query, output, lse and index read or written
    once, plus the two indptr arrays (SPEC section 6). The 16-256 B of tree mask
    per request are left out, as the SPEC's byte list does."""
    T, H = case.total_q, case.heads
    kv = case.total_kv * HEAD_DIM * KV_DTYPE_BYTES[case.kv_dtype]
    q = T * H * HEAD_DIM * 2
    out = T * H * HEAD_DIM_LATENT * 2
    lse = T * H * 4
    indices = case.total_kv * 4
    indptrs = 2 * (case.batch + 1) * 4
    return kv + q + out + lse + indices + indptrs


def visible_flops(case: Case) -> int:
    """2 * (D + D_L) per (query row, head, visible key): q.k over D, p.v over D_L."""
    return 2 * (HEAD_DIM + HEAD_DIM_LATENT) * case.heads * int(case.visible_per_row.sum())


def floor_of(case: Case, bw: float, mma: float) -> Floor:
    nbytes, flops = traffic_bytes(case), visible_flops(case)
    bw_s, mma_s = nbytes / bw, flops / mma
    return Floor(bytes=nbytes, flops=flops, visible_keys=int(case.visible_per_row.sum()),
                 bw_s=bw_s, mma_s=mma_s, floor_s=max(bw_s, mma_s),
                 bound="memory" if bw_s >= mma_s else "compute")


def working_set_bytes(case: Case) -> int:
    """Bytes one call touches (what must not stay in L2 between timed calls)."""
    return traffic_bytes(case)


def select(ids: str) -> List[Shape]:
    if not ids:
        return list(SHAPES)
    wanted = [s.strip().upper() for s in ids.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in SHAPES_BY_ID]
    if unknown:
        raise SystemExit(f"unknown shape id(s) {unknown}; known: {list(SHAPES_BY_ID)}")
    return [SHAPES_BY_ID[s] for s in wanted]
