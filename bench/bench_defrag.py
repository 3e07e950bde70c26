#!/usr/bin/env python3
"""Defragmentation benchmark (SPEC section 6, "Defrag copy").

Measures on the current GPU:
  1. device-to-device copy bandwidth: torch copy of a large buffer, bytes read
     plus written over time;
  2. kdtree_defrag_copy: 4096 random moves x 61 layers x 1152-byte rows (one
     launch), CUDA events, median of many runs with L2 flushed between them;
     efficiency = 2 * moves * layers * row_bytes / time / copy bandwidth.
     The flush reads a buffer larger than the L2 (as bench.py's timer does),
     so each timed call starts with a cold, clean L2. The same copy is also
     timed after a flush that writes the buffer: its dirty lines are written
     back while the copy runs, ~L2-size bytes of extra DRAM traffic; printed
     beside the headline figure, not counted in it;
  3. the peer: a per-layer PyTorch loop, layer.index_copy_(0, dst, layer[src]);
  4. the host planner on a 4M-slot pool producing 100k moves.
Prints a table and, with --json PATH, writes the numbers there.

The library comes from $KDTREE_KERNELS_LIB (or --lib). Bars: efficiency >= 0.85
and >= 3x the index_copy_ loop.
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import time

import numpy as np
import torch

from timing import Timer

KDTREE_DTYPE_INT64 = 5


class CopyParams(ctypes.Structure):
    """kdtree_defrag_copy_params (include/kdtree_kernels.h)."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("num_layers", ctypes.c_int32),
        ("layer_base", ctypes.c_void_p),        # [num_layers] device uint64
        ("slot_stride_bytes", ctypes.c_int64),
        ("row_bytes", ctypes.c_int64),
        ("num_slots", ctypes.c_int64),
        ("src_slots", ctypes.c_void_p),         # [max_moves] device
        ("dst_slots", ctypes.c_void_p),         # [max_moves] device
        ("index_dtype", ctypes.c_int32),
        ("reserved0", ctypes.c_int32),
        ("max_moves", ctypes.c_int64),
        ("num_moves", ctypes.c_void_p),         # optional device int64
        ("error_flag", ctypes.c_void_p),        # optional device int32
    ]


class PlanParams(ctypes.Structure):
    """kdtree_defrag_plan_params (include/kdtree_kernels.h); host pointers."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("reserved0", ctypes.c_int32),
        ("num_slots", ctypes.c_int64),
        ("num_requests", ctypes.c_int64),
        ("request_indptr", ctypes.c_void_p),
        ("request_slots", ctypes.c_void_p),
        ("free_slots", ctypes.c_void_p),
        ("num_free", ctypes.c_int64),
        ("pinned_slots", ctypes.c_void_p),
        ("num_pinned", ctypes.c_int64),
        ("reserved_slots", ctypes.c_void_p),
        ("num_reserved", ctypes.c_int64),
        ("budget", ctypes.c_int64),
        ("move_src", ctypes.c_void_p),
        ("move_dst", ctypes.c_void_p),
        ("num_moves", ctypes.c_void_p),
    ]


def load_library(path):
    if not path:
        sys.exit("bench_defrag: set KDTREE_KERNELS_LIB (or --lib) to libkdtree_kernels_c.so")
    lib = ctypes.CDLL(path)
    for name in ("kdtree_defrag_copy_params_init", "kdtree_defrag_plan_params_init",
                 "kdtree_defrag_copy", "kdtree_defrag_plan"):
        getattr(lib, name).restype = ctypes.c_int32
    lib.kdtree_last_error_message.restype = ctypes.c_char_p
    return lib


def check(lib, status, what):
    if status != 0:
        raise RuntimeError(f"{what}: status {status}: {lib.kdtree_last_error_message().decode()}")


def init_params(lib, cls, init_name):
    """Calls the C init on a generous buffer, then checks our layout's size."""
    buffer = ctypes.create_string_buffer(1024)
    check(lib, getattr(lib, init_name)(buffer), init_name)
    params = cls.from_buffer_copy(buffer.raw[:ctypes.sizeof(cls)])
    if params.struct_size != ctypes.sizeof(cls):
        sys.exit(f"bench_defrag: {cls.__name__} is {ctypes.sizeof(cls)} bytes here, "
                 f"{params.struct_size} in the library")
    return params


class Flush:
    """An L2 flush before each timed call over buffers larger than the L2:
    `clean` is bench.py's (timing.Timer: a reduction reads random data, the
    lines it leaves are clean); `dirty` writes a buffer of its own (the lines
    it leaves must be written back by whatever runs next)."""

    def __init__(self, nbytes=512 << 20):  # > L2 on every card
        self.timer = Timer(torch.device("cuda"), nbytes)
        self.clean = self.timer.flush_l2
        self._written = torch.empty(nbytes, dtype=torch.uint8, device="cuda")

    def dirty(self):
        self._written.zero_()


def time_cuda(fn, reps, flush):
    """Median milliseconds of fn() over reps runs, flush() before each."""
    times = []
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    for _ in range(reps):
        flush()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def copy_bandwidth(flush, reps):
    nbytes = 2 << 30
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    ms = time_cuda(lambda: dst.copy_(src), reps, flush.clean)
    return 2 * nbytes / (ms * 1e-3)


def copy_runner(lib, kv, bases, src, dst, check_layer):
    """kdtree_defrag_copy of rows src -> dst (int64 slots) in every layer of
    kv [layers, slots, row bytes] (layer base pointers in `bases`), as a
    callable, after one checked call (layer `check_layer`'s moved rows)."""
    layers, num_slots, row = kv.shape
    p = init_params(lib, CopyParams, "kdtree_defrag_copy_params_init")
    p.num_layers = layers
    p.layer_base = bases.data_ptr()
    p.slot_stride_bytes = row
    p.row_bytes = row
    p.num_slots = num_slots
    p.src_slots = src.data_ptr()
    p.dst_slots = dst.data_ptr()
    p.index_dtype = KDTREE_DTYPE_INT64
    p.max_moves = src.numel()
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def run():
        check(lib, lib.kdtree_defrag_copy(ctypes.byref(p), stream), "kdtree_defrag_copy")

    expected = kv[check_layer][src].clone()
    run()
    torch.cuda.synchronize()
    if not torch.equal(kv[check_layer][dst], expected):
        sys.exit("bench_defrag: kdtree_defrag_copy produced wrong rows")
    return run


def make_layers(layers, num_slots, row):
    """A pool of random bytes kv [layers, num_slots, row] and its layer base
    pointers (an int64 device tensor), as kdtree_defrag_copy takes them."""
    kv = torch.empty((layers, num_slots, row), dtype=torch.uint8, device="cuda").random_(0, 255)
    bases = torch.tensor([kv[l].data_ptr() for l in range(layers)], dtype=torch.int64, device="cuda")
    return kv, bases


def bench_copy(lib, args, flush, copy_bw):
    layers, row, moves = args.layers, args.row_bytes, args.moves
    num_slots = args.num_slots
    kv, bases = make_layers(layers, num_slots, row)
    perm = torch.randperm(num_slots, device="cuda")
    src = perm[:moves].contiguous()                    # int64
    dst = perm[moves:2 * moves].contiguous()
    ours = copy_runner(lib, kv, bases, src, dst, check_layer=layers // 2)

    ours_ms = time_cuda(ours, args.reps, flush.clean)
    ours_dirty_ms = time_cuda(ours, args.reps, flush.dirty)
    # The peer: what an engine writes in PyTorch, one layer at a time.
    rows_bf16 = kv.view(torch.bfloat16).view(layers, num_slots, row // 2)

    def peer():
        for l in range(layers):
            layer = rows_bf16[l]
            layer.index_copy_(0, dst, layer[src])

    peer_ms = time_cuda(peer, max(5, args.reps // 4), flush.clean)
    moved = 2 * moves * layers * row
    return {
        "moves": moves, "layers": layers, "row_bytes": row, "num_slots": num_slots,
        "bytes_moved": moved,
        "ours_ms": ours_ms, "ours_bw": moved / (ours_ms * 1e-3),
        "efficiency": moved / (ours_ms * 1e-3) / copy_bw,
        "ours_dirty_l2_ms": ours_dirty_ms, "efficiency_dirty_l2": moved / (ours_dirty_ms * 1e-3) / copy_bw,
        "index_copy_ms": peer_ms, "speedup_vs_index_copy": peer_ms / ours_ms,
    }


def bench_planner(lib, reps):
    """4M slots: 3M shuffled slots, 3000 requests of 500 (fully fragmented)
    plus 1.5M free holes, and a 1M free contiguous tail; budget 100k."""
    num_slots, region, requests, per = 4 << 20, 3 << 20, 3000, 500
    rng = np.random.default_rng(424242)
    perm = rng.permutation(region).astype(np.int64)
    live = requests * per
    request_slots = np.ascontiguousarray(perm[:live])
    indptr = np.arange(0, live + 1, per, dtype=np.int64)
    free_slots = np.concatenate([perm[live:], np.arange(region, num_slots, dtype=np.int64)])
    reserved = np.zeros(1, dtype=np.int64)
    budget = 100_000
    move_src = np.empty(budget, dtype=np.int64)
    move_dst = np.empty(budget, dtype=np.int64)
    count = np.zeros(1, dtype=np.int64)

    p = init_params(lib, PlanParams, "kdtree_defrag_plan_params_init")
    p.num_slots = num_slots
    p.num_requests = requests
    p.request_indptr = indptr.ctypes.data
    p.request_slots = request_slots.ctypes.data
    p.free_slots = free_slots.ctypes.data
    p.num_free = free_slots.size
    p.reserved_slots = reserved.ctypes.data
    p.num_reserved = 1
    p.budget = budget
    p.move_src = move_src.ctypes.data
    p.move_dst = move_dst.ctypes.data
    p.num_moves = count.ctypes.data
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        check(lib, lib.kdtree_defrag_plan(ctypes.byref(p)), "kdtree_defrag_plan")
        times.append((time.perf_counter() - t0) * 1e3)
    return {"num_slots": num_slots, "live": live, "budget": budget, "moves": int(count[0]),
            "planner_ms": statistics.median(times)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=os.environ.get("KDTREE_KERNELS_LIB"))
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--moves", type=int, default=4096)
    ap.add_argument("--layers", type=int, default=61)
    ap.add_argument("--row-bytes", type=int, default=1152)
    ap.add_argument("--num-slots", type=int, default=1 << 17)
    ap.add_argument("--reps", type=int, default=50)
    args = ap.parse_args()

    lib = load_library(args.lib)
    if not torch.cuda.is_available():
        sys.exit("bench_defrag: no CUDA device")
    torch.manual_seed(0)
    flush = Flush()

    copy_bw = copy_bandwidth(flush, args.reps)
    result = bench_copy(lib, args, flush, copy_bw)
    planner = bench_planner(lib, 5)

    print(f"device: {torch.cuda.get_device_name()}")
    print(f"device-to-device copy bandwidth: {copy_bw / 1e12:.3f} TB/s")
    print(f"{'what':<34}{'time (ms)':>12}{'TB/s':>10}{'eff.':>8}")
    print(f"{'kdtree_defrag_copy':<34}{result['ours_ms']:>12.4f}{result['ours_bw'] / 1e12:>10.3f}"
          f"{result['efficiency']:>8.3f}")
    print(f"{'  same, after a writing flush':<34}{result['ours_dirty_l2_ms']:>12.4f}"
          f"{result['bytes_moved'] / (result['ours_dirty_l2_ms'] * 1e-3) / 1e12:>10.3f}"
          f"{result['efficiency_dirty_l2']:>8.3f}")
    peer_bw = result["bytes_moved"] / (result["index_copy_ms"] * 1e-3)
    print(f"{'per-layer torch index_copy_':<34}{result['index_copy_ms']:>12.4f}{peer_bw / 1e12:>10.3f}"
          f"{peer_bw / copy_bw:>8.3f}")
    print(f"{result['moves']} moves x {result['layers']} layers x {result['row_bytes']} B rows: "
          f"{result['bytes_moved'] / 1e6:.1f} MB read+written; "
          f"speedup vs index_copy_ {result['speedup_vs_index_copy']:.2f}x "
          f"(bars: efficiency >= 0.85, speedup >= 3)")
    print(f"planner: {planner['num_slots']} slots, {planner['live']} live, {planner['moves']} moves "
          f"in {planner['planner_ms']:.1f} ms")

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "copy_bw": copy_bw,
                       "defrag_copy": result, "planner": planner}, f, indent=2)

    # The three figures BENCHMARKS.md records, last and in a fixed form.
    print(f"defrag copy efficiency: {result['efficiency']:.3f}")
    print(f"defrag vs index_copy_: {result['speedup_vs_index_copy']:.1f}x")
    print(f"planner 100k moves: {planner['planner_ms']:.1f} ms")


if __name__ == "__main__":
    main()
