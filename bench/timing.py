"""How every implementation is timed, the same way for ours and the peers.

Cold-L2 per-call time: before each timed call the L2 is flushed by *reading* a
256 MiB buffer (a read leaves clean lines, so the timed call does not pay for
writing back someone else's dirty lines), then CUDA events bracket the call
alone. The flush kernel also gives the host time to enqueue the call before the
GPU reaches it, so Python launch overhead stays out of the event window. The
median over the iterations is the time.

Graph replay (short shapes): K calls rotating over several input sets, whose
total footprint is a few times the L2, captured once into a CUDA graph and
replayed; per-call time = replay time / K. This is the back-to-back time an
engine with CUDA graphs sees, launch gaps included.
"""

import statistics
from typing import Callable, List, Sequence

import torch

FLUSH_BYTES = 256 << 20


class Timer:
    def __init__(self, device: torch.device, flush_bytes: int = FLUSH_BYTES):
        self.device = device
        # Random data, not zeros: the flush reads it with a reduction.
        self._flush = torch.rand(flush_bytes // 4, device=device, dtype=torch.float32)

    def flush_l2(self) -> None:
        self._flush.sum()

    def cold_ms(self, fn: Callable[[], object], iters: int, warmup: int = 2) -> List[float]:
        """Per-call times (ms) of `fn` with the L2 flushed before each call."""
        return self.cold_ms_interleaved([fn], iters, warmup)[0]

    def cold_ms_interleaved(self, fns: Sequence[Callable[[], object]], iters: int,
                            warmup: int = 2) -> List[List[float]]:
        """cold_ms for several versions of one call at once: each iteration times
        every fn once (L2 flushed before each), the order rotating by one per
        iteration, so that all of them see the same clocks and temperature over
        the run, whatever drifts. One list of per-call times (ms) per fn."""
        return self._per_call_ms(fns, iters, warmup, flush=True)

    def warm_ms(self, fn: Callable[[], object], iters: int, warmup: int = 2) -> List[float]:
        """Per-call times (ms) of `fn` called back to back, no flush: L2 holds
        what the call before left (the code, the metadata, what fits of the data)."""
        return self._per_call_ms([fn], iters, warmup, flush=False)[0]

    def _per_call_ms(self, fns: Sequence[Callable[[], object]], iters: int, warmup: int,
                     flush: bool) -> List[List[float]]:
        """Each fn's calls bracketed by CUDA events, the order rotating by one per
        iteration, the L2 flushed before each call when `flush`."""
        n = len(fns)
        for fn in fns:
            for _ in range(warmup):
                fn()
        torch.cuda.synchronize(self.device)
        starts = [[torch.cuda.Event(enable_timing=True) for _ in range(iters)] for _ in fns]
        ends = [[torch.cuda.Event(enable_timing=True) for _ in range(iters)] for _ in fns]
        for i in range(iters):
            for j in range(n):
                k = (i + j) % n
                if flush:
                    self.flush_l2()
                starts[k][i].record()
                fns[k]()
                ends[k][i].record()
        torch.cuda.synchronize(self.device)
        return [[s.elapsed_time(e) for s, e in zip(starts[k], ends[k])] for k in range(n)]

    def estimate_ms(self, fn: Callable[[], object]) -> float:
        """One cold call's time, to size the iteration count (also a warm-up)."""
        fn()
        return min(self.cold_ms(fn, iters=2, warmup=0))

    def graph_ms(self, fns: Sequence[Callable[[], object]], calls_per_graph: int,
                 replays: int, repeats: int = 5) -> List[float]:
        """Per-call times (ms) of back-to-back graph replays of `calls_per_graph`
        calls rotating over `fns` (one per input set). One value per repeat."""
        for fn in fns:  # eager warm-up outside the capture
            fn()
        torch.cuda.synchronize(self.device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for k in range(calls_per_graph):
                fns[k % len(fns)]()
        graph.replay()
        torch.cuda.synchronize(self.device)
        per_call = []
        for _ in range(repeats):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(replays):
                graph.replay()
            end.record()
            torch.cuda.synchronize(self.device)
            per_call.append(start.elapsed_time(end) / (replays * calls_per_graph))
        del graph
        return per_call


def iterations_for(estimate_ms: float, budget_ms: float, lo: int, hi: int) -> int:
    """As many iterations as fit in `budget_ms`, clamped to [lo, hi]."""
    if estimate_ms <= 0:
        return hi
    return max(lo, min(hi, int(budget_ms / estimate_ms)))


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def spread(values: Sequence[float]) -> float:
    """(max - min) / median of the values: how noisy the number is."""
    m = median(values)
    return (max(values) - min(values)) / m if m > 0 else float("nan")
