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

--peer flashmla times FlashMLA (bench/peers.py's peer; --site names where its
package is) on the same inputs in one interleaved loop with ours, and fits its
line over its own CTA's tiles: its metadata gives each of its sm parts an
even share of the batch's 64-key tiles, so for a family whose splits match
its parts (B = 1: 33 for 1,16,16 and 8 for 1,16,64 on 132 SMs) both lines
compare the tile rate and the fixed cost of one block against one CTA.

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


def flashmla_parts(heads: int, q_len: int, sm_count: int) -> int:
    """FlashMLA's sm parts per 64-row block (its metadata's num_sm_parts with
    one KV head): the SMs over the row blocks of q_len x H query rows."""
    return max(1, sm_count // math.ceil(q_len * heads / ROWS_PER_BLOCK))


def flashmla_tiles_per_cta(batch: int, heads: int, q_len: int, prefix: int, sm_count: int) -> float:
    """One FlashMLA CTA's even share of the batch's 64-key tiles."""
    return batch * math.ceil((prefix + q_len) / KEYS_PER_TILE) / flashmla_parts(heads, q_len, sm_count)


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
    ap.add_argument("--peer", choices=["flashmla"], default=None,
                    help="also time this peer, interleaved with ours, and fit its line")
    ap.add_argument("--site", action="append", default=[], help="extra import path for the peer")
    ap.add_argument("--warm", action="store_true",
                    help="no L2 flush between calls (the code and metadata stay in L2)")
    args = ap.parse_args()

    sys.path[1:1] = [os.path.abspath(p) for p in args.site]
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
    if args.peer:
        from peers import FlashMLAPeer
        sms = torch.cuda.get_device_properties(dev).multi_processor_count
    xs, ys, peer_xs, peer_ys = [], [], [], []
    for prefix in (int(p) for p in args.prefixes.split(",")):
        case = build_case(Shape(f"P{prefix}", batch, heads, q_len, prefix, "sweep"))
        inp = make_input_set(case, 0, dev)
        run = OursRunner(lib, inp, args.splits)
        run.bind_workspace(torch.empty(max(run.workspace_bytes, 16), dtype=torch.uint8, device=dev))
        tiles = tiles_per_block(prefix, q_len, args.splits)
        line = f"  prefix {prefix:7d}: {tiles:4d} tiles per block"
        if args.peer:
            peer = FlashMLAPeer(inp)
            ours_ms, peer_ms = (median(t) for t in timer.cold_ms_interleaved([run, peer], args.iters))
            parts = flashmla_parts(heads, q_len, sms)
            peer_tiles = flashmla_tiles_per_cta(batch, heads, q_len, prefix, sms)
            peer_xs.append(peer_tiles)
            peer_ys.append(peer_ms * 1e3)
            line += f", {ours_ms:.4f} ms; {args.peer}: {peer_tiles:.3f} tiles per CTA ({parts} parts), {peer_ms:.4f} ms"
            del peer
        else:
            ours_ms = median(timer.warm_ms(run, args.iters) if args.warm else timer.cold_ms(run, args.iters))
            line += f", {ours_ms:.4f} ms"
        xs.append(tiles)
        ys.append(ours_ms * 1e3)
        print(line)
        del run, inp
        torch.cuda.empty_cache()
    for name, px, py, unit in (("ours", xs, ys, "block"), (args.peer, peer_xs, peer_ys, "CTA")):
        if len(px) >= 2:
            fixed, per_tile, worst = fit(px, py)
            print(f"  {name} fit: {fixed:.1f} us fixed + {per_tile:.3f} us per tile per {unit} "
                  f"(largest residual {worst:.1f} us)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
