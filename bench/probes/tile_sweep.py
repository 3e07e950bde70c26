"""Where a verify call's time goes between its key tiles and the rest: one
shape family (B, H, q_len fixed) timed over several prefixes at a fixed split
count, so that every block's tile count varies and nothing else does, then a
least-squares line  time = fixed + per_tile * tiles_per_block.

per_tile is the tile loop's rate per SM; fixed is everything else (launch,
each block's start before its loop runs at that rate, the epilogue, the
merge). Cold L2 and CUDA events as bench.py (median of --iters calls); --warm
leaves L2 as the call before left it.

    python3 bench/probes/tile_sweep.py --family 1,16,16 --splits 33 \
        --prefixes 131072,196608,262144,393216,524288
    python3 bench/probes/tile_sweep.py --family 64,16,8 --splits 1 \
        --prefixes 3072,4096,6144,8192,12288

The library is --lib, else $KDTREE_KERNELS_LIB, else build-gpu/ or build/.
"""

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

from shapes import Shape, build_case  # noqa: E402

KEYS_PER_TILE = 64
ROWS_PER_BLOCK = 64


def tiles_per_block(prefix: int, q_len: int, splits: int) -> int:
    """The first split's tiles (the library's split_chunk: an even share of the
    keys, rounded up to whole tiles)."""
    return math.ceil(math.ceil((prefix + q_len) / splits) / KEYS_PER_TILE)


def fit(xs, ys):
    """Least squares y = a + b x; returns (a, b, largest |residual|)."""
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    b, a = np.polyfit(x, y, 1)
    return a, b, float(np.max(np.abs(y - (a + b * x))))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", required=True, help="B,H,q_len")
    ap.add_argument("--prefixes", required=True, help="comma list of prefix lengths")
    ap.add_argument("--splits", type=int, required=True, help="num_splits passed to every call")
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--lib", default=None)
    ap.add_argument("--warm", action="store_true",
                    help="no L2 flush between calls (the code and metadata stay in L2)")
    args = ap.parse_args()

    import torch

    from bench import find_library
    from inputs import make_input_set
    from ours import KdtreeLib, OursRunner
    from timing import Timer, median

    batch, heads, q_len = (int(v) for v in args.family.split(","))
    lib = KdtreeLib(find_library(args.lib))
    dev = torch.device("cuda")
    lib.prepare(0)
    timer = Timer(dev)
    blocks = batch * math.ceil(q_len * heads / ROWS_PER_BLOCK) * args.splits
    print(f"family B={batch} H={heads} q={q_len}, num_splits {args.splits}: {blocks} blocks; {lib.path}")
    xs, ys = [], []
    for prefix in (int(p) for p in args.prefixes.split(",")):
        case = build_case(Shape(f"P{prefix}", batch, heads, q_len, prefix, "sweep"))
        inp = make_input_set(case, 0, dev)
        run = OursRunner(lib, inp, args.splits)
        run.bind_workspace(torch.empty(max(run.workspace_bytes, 16), dtype=torch.uint8, device=dev))
        ms = median(timer.warm_ms(run, args.iters) if args.warm else timer.cold_ms(run, args.iters))
        tiles = tiles_per_block(prefix, q_len, args.splits)
        xs.append(tiles)
        ys.append(ms * 1e3)
        print(f"  prefix {prefix:7d}: {tiles:4d} tiles per block, {ms:.4f} ms")
        del run, inp
        torch.cuda.empty_cache()
    if len(xs) >= 2:
        fixed, per_tile, worst = fit(xs, ys)
        print(f"  fit: {fixed:.1f} us fixed + {per_tile:.3f} us per tile per block "
              f"(largest residual {worst:.1f} us)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
