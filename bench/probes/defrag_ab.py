#!/usr/bin/env python3
"""The defrag copy's rate: its fixed cost, and builds side by side.

Probes of bench_defrag.py's copy (61 layers x 1152-byte rows, random moves,
L2 flushed by a read before each call; DEFRAG_NUM_SLOTS sets the pool):

  sweep [MOVES ...]  time per call for several move counts with the library
             in KDTREE_KERNELS_LIB, and a least-squares line through them: the
             intercept is the call's fixed cost, the slope the per-move rate,
             whose efficiency is what an unbounded copy would reach.
  ab NAME=LIB ...  builds of the library loaded side by side in one process,
             timed as bench.py --interleave times builds (timing.Timer: each
             of AB_ITERS iterations calls every build once, L2 flushed before
             each call, the order rotating), as each build's median and
             efficiency. (Session 40's figures came from an earlier form:
             four rounds of 30 calls a build, each round's median.)

Run on the GPU machine from the repository root (docs/perf_notes.md,
"Defrag copy, session 40").
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tile_sweep import fit  # noqa: E402  (this folder is on sys.path when run as a script)

LAYERS, ROW = 61, 1152
MOVE_BYTES = 2 * LAYERS * ROW  # read and written per move
AB_MOVES = 4096                # the ab mode's copy (bench_defrag's default)
NUM_SLOTS = int(os.environ.get("DEFRAG_NUM_SLOTS", 1 << 17))


def inputs(torch, bd, moves):
    """bench_defrag's pool and base pointers, and a slot permutation whose
    first 2 x moves slots give distinct sources and destinations."""
    if 2 * moves > NUM_SLOTS:
        sys.exit(f"defrag_ab: {moves} moves need {2 * moves} slots, the pool has {NUM_SLOTS}")
    kv, bases = bd.make_layers(LAYERS, NUM_SLOTS, ROW)
    return kv, bases, torch.randperm(NUM_SLOTS, device="cuda")


def efficiency(nbytes, ms, copy_bw):
    """nbytes moved in ms against the reference copy's bandwidth."""
    return nbytes / (ms * 1e-3) / copy_bw


def sweep(counts, reps):
    import torch
    import bench_defrag as bd
    lib = bd.load_library(os.environ["KDTREE_KERNELS_LIB"])
    flush = bd.Flush()
    copy_bw = bd.copy_bandwidth(flush, reps)
    kv, bases, perm = inputs(torch, bd, max(counts))
    rows = []
    for m in counts:
        run = bd.copy_runner(lib, kv, bases, perm[:m].contiguous(), perm[m:2 * m].contiguous(),
                             check_layer=LAYERS - 1)
        ms = bd.time_cuda(run, reps, flush.clean)
        rows.append((m, ms))
    icpt, slope, _ = fit([m for m, _ in rows], [t for _, t in rows])
    print(f"copy bandwidth {copy_bw / 1e12:.3f} TB/s")
    print(f"{'moves':>7} {'ms':>9} {'eff':>6} {'fit ms':>9}")
    for m, t in rows:
        print(f"{m:>7} {t:>9.4f} {efficiency(m * MOVE_BYTES, t, copy_bw):>6.3f} {icpt + slope * m:>9.4f}")
    print(f"fixed cost {icpt * 1e3:.2f} us; per 1000 moves {slope * 1e6:.2f} us; "
          f"slope efficiency {efficiency(MOVE_BYTES, slope, copy_bw):.3f}")


def ab(builds, iters, reps):
    import torch
    import bench_defrag as bd
    flush = bd.Flush()
    copy_bw = bd.copy_bandwidth(flush, reps)
    kv, bases, perm = inputs(torch, bd, AB_MOVES)
    src, dst = perm[:AB_MOVES].contiguous(), perm[AB_MOVES:2 * AB_MOVES].contiguous()
    names, copies = [], []
    for spec in builds:
        name, path = spec.split("=", 1)
        names.append(name)
        copies.append(bd.copy_runner(bd.load_library(path), kv, bases, src, dst, check_layer=LAYERS - 1))
    # bench.py's interleaved timing (timing.Timer), behind bench_defrag's flush.
    times = flush.timer.cold_ms_interleaved(copies, iters)
    print(f"copy bandwidth {copy_bw / 1e12:.3f} TB/s; {iters} calls each, interleaved")
    print(f"{'build':<16}{'median ms':>10}{'eff':>7}{'p10..p90 ms':>18}")
    for name, t in zip(names, times):
        q = statistics.quantiles(t, n=10)
        ms = statistics.median(t)
        print(f"{name:<16}{ms:>10.4f}{efficiency(AB_MOVES * MOVE_BYTES, ms, copy_bw):>7.4f}{q[0]:>10.4f}..{q[-1]:.4f}")


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "sweep":
        sweep([int(x) for x in (sys.argv[2:] or ["1024", "2048", "4096", "8192", "16384"])],
              int(os.environ.get("SWEEP_REPS", "30")))
    elif mode == "ab" and len(sys.argv) > 2:
        ab(sys.argv[2:], int(os.environ.get("AB_ITERS", "120")), int(os.environ.get("SWEEP_REPS", "30")))
    else:
        sys.exit(__doc__)
