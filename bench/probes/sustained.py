#!/usr/bin/env python3
"""One shape's kdtree_verify_paged called cold (L2 flushed before each call, as
bench.py times it) for a few seconds, with each call's CUDA-event time: the
medians of each tenth of the run, to see whether calls slow down as the run
goes on, and the overall median; and nvidia-smi's SM clock, power and
clock-event reasons over the timed calls (clock_sampler.py), to see whether
the clock fell under the power cap. run_clocks.sh runs it per shape.

  python3 bench/probes/sustained.py --shape S6 [--seconds 2] [--lib build-gpu/libkdtree_kernels_c.so]
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/


def main(argv=None) -> int:
    import torch

    from bench import find_library
    from clock_sampler import ClockSampler, describe
    from inputs import make_input_set
    from ours import KdtreeLib, OursRunner
    from shapes import SHAPES_BY_ID, build_case
    from timing import Timer

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", required=True, choices=sorted(SHAPES_BY_ID))
    ap.add_argument("--seconds", type=float, default=2.0, help="how long to keep calling")
    ap.add_argument("--lib", help="libkdtree_kernels_c.so (default: as bench.py finds it)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    path = find_library(args.lib)
    if path is None:
        print("sustained: no libkdtree_kernels_c.so (--lib or $KDTREE_KERNELS_LIB)", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    lib = KdtreeLib(path)
    runner = OursRunner(lib, make_input_set(build_case(SHAPES_BY_ID[args.shape], args.seed), 0, dev))
    runner.bind_workspace(torch.empty(max(runner.workspace_bytes, 16), dtype=torch.uint8, device=dev))
    timer = Timer(dev)
    estimate = timer.estimate_ms(runner)
    calls = max(20, int(args.seconds * 1e3 / (estimate + 0.1)))  # + the flush, ~0.1 ms
    clocks = ClockSampler(dev.index or 0)
    begin = time.time()
    times = timer.cold_ms(runner, calls)
    end = time.time()
    wall = end - begin
    if int(runner.error_flag.item()) != 0:
        print(f"sustained: error flag {int(runner.error_flag.item())}", file=sys.stderr)
        return 1
    tenth = max(1, calls // 10)
    parts = [statistics.median(times[i:i + tenth]) for i in range(0, calls - tenth + 1, tenth)]
    print(f"[{args.shape}] {calls} cold calls in {wall:.2f} s: median {statistics.median(times):.4f} ms, "
          f"min {min(times):.4f}, max {max(times):.4f}")
    print("  median by tenth of the run (ms): " + " ".join(f"{p:.4f}" for p in parts))
    print("  " + describe(clocks.window(begin, end)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
