#!/usr/bin/env python3
"""The verify benchmark: kdtree_verify_paged against the hardware floor and its peers.

    python3 bench/bench.py --lib build-gpu/libkdtree_kernels_c.so \
        --json $OUT/bench.json --plot $OUT/bench.png [--markdown] [--sweep-splits]
    python3 bench/bench.py --dry-run            # no GPU: shapes, floors (nominal ceilings)
    python3 bench/bench.py --lib build-gpu/libkdtree_kernels_c.so \
        --compare-lib portable=build-gpu-portable/libkdtree_kernels_c.so

--compare-lib LABEL=PATH (repeatable) also checks and times another build of
the library (e.g. -DKDTREE_SM90A=OFF: the portable mma.sync kernel) on the same
inputs as ours, through a handle of its own: per shape the columns "LABEL ms"
and "LABEL eff", and a last summary line "LABEL geomean efficiency: X".
--interleave times ours and the compared builds in one loop instead of one
after another (each iteration calls every build once, the order rotating), so
a drift of the card's clocks over the run reaches all of them alike: the form
for A/B runs of one kernel's versions (scripts/ab_bench.sh). It times cold
calls only (no graph replays, no --sweep-splits). --interleave-peer NAME puts
a peer in that loop too, checked as usual (e.g. flashmla: FlashMLA on its
own hardware at the same clocks as ours; bench/build_flashmla.sh builds it).

One run measures the card's ceilings (copy bandwidth, mma.sync bf16 peak), then
for each shape S1-S8 (SPEC section 6) builds the inputs, checks ours and every
peer against an fp32 reference, and times them cold (L2 flushed, CUDA events,
median) and, for short shapes, as CUDA-graph replays over rotated input sets.
The floor is max(bytes / BW, flops / MMA); efficiency = floor / time.

The library is --lib, else $KDTREE_KERNELS_LIB, else build-gpu/ or build/.
Exit status: 0 all good, 1 a correctness check of ours (or of a compared
library) failed, 2 ours did not run.
"""

import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

from shapes import (FLASHMLA_SPEC_EFFICIENCY, FLASHMLA_SPEC_S8_MS, KV_DTYPE_BYTES,  # noqa: E402
                    NOMINAL_BW_BYTES_PER_S, NOMINAL_MMA_FLOP_PER_S, build_case, floor_of,
                    select, working_set_bytes)

OUT_TOLERANCE = 5e-3     # relative Frobenius error of out (bf16 inputs), SPEC section 7
LSE_TOLERANCE = 1e-3     # absolute error of lse
SPLIT_VARIANTS = (1, 2, 4, 8, 16, 32, 0)  # 0 = auto
GRAPH_FLOOR_S = 200e-6   # shapes with a floor under this are also timed as graph replays
NOMINAL_L2_BYTES = 60 << 20
MAX_INPUT_SETS = 8


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=None,
                    help="libkdtree_kernels_c.so (default: $KDTREE_KERNELS_LIB, build-gpu/, build/)")
    ap.add_argument("--compare-lib", action="append", default=[], metavar="LABEL=PATH",
                    help="also check and time this build of the library on the same inputs "
                         "as ours (e.g. portable=build-gpu-portable/libkdtree_kernels_c.so); "
                         "repeatable")
    ap.add_argument("--json", default=None, help="write every number here")
    ap.add_argument("--plot", default=None, help="write a PNG plot here (matplotlib)")
    ap.add_argument("--markdown", action="store_true", help="print the BENCHMARKS.md table")
    ap.add_argument("--shapes", default="", help="comma list of shape ids, e.g. S1,S8")
    ap.add_argument("--quick", action="store_true", help="smaller timing budgets")
    ap.add_argument("--interleave", action="store_true",
                    help="time ours and every --compare-lib in one interleaved loop "
                         "(cold calls only: no graph replays, no split sweep)")
    ap.add_argument("--interleave-peer", action="append", default=[], metavar="NAME",
                    help="time this peer (e.g. flashmla) in one interleaved loop with ours "
                         "(and any --compare-lib): a same-clock comparison; repeatable")
    ap.add_argument("--contiguous-slots", action="store_true",
                    help="each request's keys in consecutive slots instead of SPEC's fragmented "
                         "page_size-1 cache (a diagnostic: what the fragmentation costs)")
    ap.add_argument("--kv-dtype", default="bf16", choices=sorted(KV_DTYPE_BYTES),
                    help="the KV cache's element type (query and output stay bf16): fp8 is e4m3 "
                         "with kv_scale 1, runs the portable kernel on every arch, halves the "
                         "floor's KV bytes and has no peer")
    ap.add_argument("--dry-run", action="store_true",
                    help="no GPU: build the shapes' metadata and print floors (numpy only)")
    ap.add_argument("--sweep-splits", action="store_true",
                    help="also time ours with num_splits 1,2,4,8,16,32 and auto")
    ap.add_argument("--peers", default="torch,triton,flashmla,flashinfer",
                    help="comma list of peers to try (torch,triton,flashmla,flashinfer or none)")
    ap.add_argument("--site", action="append", default=[],
                    help="extra import path for peers (e.g. /tmp/site with sglang); repeatable")
    ap.add_argument("--commit", default=None, help="commit id to record (default: git rev-parse)")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    args.compare = compare_specs(ap, args.compare_lib)
    return args


def compare_specs(ap, specs: List[str]) -> List[Tuple[str, str]]:
    """--compare-lib LABEL=PATH values as (label, path). A label names table
    columns and a summary line: one word, unique, not "ours"."""
    pairs = []
    for spec in specs:
        label, sep, path = spec.partition("=")
        if not sep or not label or not path:
            ap.error(f"--compare-lib {spec!r}: expected LABEL=PATH")
        if label.split() != [label] or label == "ours":
            ap.error(f"--compare-lib {spec!r}: the label must be one word other than 'ours'")
        if label in (p[0] for p in pairs):
            ap.error(f"--compare-lib {spec!r}: label {label!r} given twice")
        pairs.append((label, path))
    return pairs


# --------------------------------------------------------------------------- #
# Small helpers                                                               #
# --------------------------------------------------------------------------- #

def geomean(values: List[float]) -> Optional[float]:
    values = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not values:
        return None
    return float(math.exp(sum(math.log(v) for v in values) / len(values)))


def fmt(value, spec: str = ".3f", none: str = "-") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return none
    return format(value, spec)


def git_commit(explicit: Optional[str]) -> str:
    """--commit, else a COMMIT file at the repository root (a `git archive`
    snapshot carried to the GPU machine has no .git of its own), else git."""
    if explicit:
        return explicit
    stamp = os.path.join(REPO, "COMMIT")
    if os.path.isfile(stamp):
        with open(stamp) as f:
            commit = f.read().strip()
        if commit:
            return commit
    try:
        run = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                             capture_output=True, text=True, timeout=10)
        if run.returncode == 0 and run.stdout.strip():
            return run.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


def find_library(explicit: Optional[str]) -> Optional[str]:
    candidates = [explicit, os.environ.get("KDTREE_KERNELS_LIB"),
                  str(REPO / "build-gpu" / "libkdtree_kernels_c.so"),
                  str(REPO / "build" / "libkdtree_kernels_c.so")]
    for c in candidates:
        if c and Path(c).is_file():
            return c
    return None


def to_jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def shape_meta(case, floor) -> Dict:
    s = case.shape
    return {"id": s.id, "B": s.batch, "H": s.heads, "q": s.q_len, "P": s.prefix,
            "stands_for": s.stands_for, "total_q": case.total_q, "total_kv": case.total_kv,
            "num_slots": case.num_slots, "visible_keys_per_head": floor.visible_keys,
            "bytes": floor.bytes, "flops": floor.flops, "floor_ms": floor.floor_ms,
            "bw_ms": floor.bw_s * 1e3, "mma_ms": floor.mma_s * 1e3, "bound": floor.bound,
            "working_set_bytes": working_set_bytes(case),
            "slots": "contiguous" if case.contiguous_slots else "random permutation",
            "flashmla_spec_efficiency": FLASHMLA_SPEC_EFFICIENCY.get(s.id)}


# --------------------------------------------------------------------------- #
# Dry run: numpy only                                                         #
# --------------------------------------------------------------------------- #

def dry_run(args) -> int:
    shapes = select(args.shapes)
    bw, mma = NOMINAL_BW_BYTES_PER_S, NOMINAL_MMA_FLOP_PER_S
    print(f"DRY RUN (no GPU): nominal ceilings BW {bw / 1e12:.2f} TB/s, "
          f"MMA {mma / 1e12:.0f} TFLOP/s (SPEC section 6); L2 assumed {NOMINAL_L2_BYTES >> 20} MiB; "
          f"KV {args.kv_dtype}")
    header = (f"{'shape':5} {'B':>3} {'H':>4} {'q':>3} {'P':>7} {'T':>5} {'keys':>8} "
              f"{'vis/row':>9} {'MB':>8} {'GFLOP':>8} {'bw us':>8} {'mma us':>8} "
              f"{'floor us':>9} {'bound':>7} {'sets':>4} {'FlashMLA us':>11}")
    print(header)
    print("-" * len(header))
    results = []
    t0 = time.time()
    for shape in shapes:
        case = build_case(shape, args.seed, args.contiguous_slots, args.kv_dtype)
        fl = floor_of(case, bw, mma)
        meta = shape_meta(case, fl)
        sets = input_sets_for(case, fl, NOMINAL_L2_BYTES)
        spec_eff = FLASHMLA_SPEC_EFFICIENCY.get(shape.id)
        flashmla_us = fl.floor_s * 1e6 / spec_eff if spec_eff else None
        meta.update({"input_sets": sets, "flashmla_spec_us": flashmla_us})
        # consistency checks of the metadata the GPU run will hand to the kernels
        assert case.tree_dense.size == int(case.tree_dense_indptr[-1])
        full, full_indptr = case.sglang_full_mask()
        assert full.size == int(full_indptr[-1])
        assert all(np.array_equal(np.diag(m), np.ones(len(m), np.uint8)) for m in case.masks)
        assert all(not np.triu(m, 1).any() for m in case.masks)  # parents are earlier nodes
        print(f"{shape.id:5} {shape.batch:>3} {shape.heads:>4} {shape.q_len:>3} {shape.prefix:>7} "
              f"{case.total_q:>5} {case.total_kv:>8} {fl.visible_keys / case.total_q:>9.1f} "
              f"{fl.bytes / 1e6:>8.1f} {fl.flops / 1e9:>8.1f} {fl.bw_s * 1e6:>8.1f} "
              f"{fl.mma_s * 1e6:>8.1f} {fl.floor_s * 1e6:>9.1f} {fl.bound:>7} {sets:>4} "
              f"{fmt(flashmla_us, '.1f'):>11}")
        results.append({"meta": meta})
    print(f"\n'sets': input sets rotated in graph-replay timing (floor < "
          f"{GRAPH_FLOOR_S * 1e6:.0f} us); 'FlashMLA us': floor / the SPEC's measured "
          f"FlashMLA efficiency, the time ours must beat on the Hopper path.")
    print(f"metadata built in {time.time() - t0:.1f} s")
    report = {"dry_run": True, "bw_bytes_per_s": bw, "mma_flop_per_s": mma,
              "ceilings_source": "nominal (SPEC section 6)", "shapes": results,
              "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "commit": git_commit(args.commit)}
    if args.compare:
        report["compare_libs"] = dry_run_compare(args)
    write_outputs(args, report)
    return 0


def dry_run_compare(args) -> List[Dict]:
    """Say what a GPU run would compare: each library's path and build info
    (the library loads without a GPU: static cudart, SPEC section 4)."""
    import ctypes

    def describe(path: Optional[str]) -> Dict:
        if path is None or not Path(path).is_file():
            return {"path": path, "found": False, "build_info": None}
        path = str(Path(path).resolve())
        try:
            cdll = ctypes.CDLL(path)
            cdll.kdtree_build_info.restype = ctypes.c_char_p
            info = (cdll.kdtree_build_info() or b"").decode()
        except (OSError, AttributeError) as e:
            info = f"does not load: {e}"
        return {"path": path, "found": True, "build_info": info}

    def line(label: str, d: Dict) -> str:
        if not d["found"]:
            return f"  {label}: {d['path'] or '(no library found)'}: NOT FOUND"
        return f"  {label}: {d['path']} ({d['build_info']})"

    ours = describe(find_library(args.lib))
    print("\nwould compare, per shape on the same inputs and against the same reference "
          "(kdtree_verify_paged, cold timing):")
    print(line("ours", ours))
    entries = []
    for label, path in args.compare:
        d = describe(path)
        print(line(label, d))
        entries.append({"label": label, **d})
    labels = [label for label, _ in args.compare]
    print("columns " + ", ".join(f"'{lab} ms', '{lab} eff'" for lab in labels) + "; summary "
          + ", ".join(f"'{lab} geomean efficiency'" for lab in labels))
    return entries


def input_sets_for(case, fl, l2_bytes: int) -> int:
    """Input sets to rotate: enough that their footprint is 3x the L2, at least 2,
    for shapes timed as graph replays; 1 otherwise (the flush keeps cold-L2 timing
    honest on its own)."""
    if fl.floor_s >= GRAPH_FLOOR_S:
        return 1
    return int(min(MAX_INPUT_SETS, max(2, math.ceil(3 * l2_bytes / working_set_bytes(case)))))


# --------------------------------------------------------------------------- #
# GPU run                                                                     #
# --------------------------------------------------------------------------- #

def gpu_run(args) -> int:
    try:
        import torch
    except ImportError as e:
        print(f"torch is not importable ({e}): use --dry-run on a machine without it",
              file=sys.stderr)
        return 2

    from ceilings import copy_bandwidth, mma_peak
    from clock_sampler import ClockSampler
    from inputs import causal_masks, make_input_set, reference, rel_frobenius
    from ours import KdtreeLib
    from peers import PEERS
    from timing import Timer, iterations_for, median, spread

    if not torch.cuda.is_available():
        print("no CUDA device: use --dry-run on a machine without a GPU", file=sys.stderr)
        return 2
    t_start = time.time()
    torch.cuda.set_device(args.device)
    dev = torch.device("cuda", args.device)
    props = torch.cuda.get_device_properties(dev)
    l2_bytes = int(getattr(props, "L2_cache_size", 0) or NOMINAL_L2_BYTES)
    quick = 0.35 if args.quick else 1.0
    commit = git_commit(args.commit)
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    env = {"device": props.name, "sm_count": props.multi_processor_count,
           "capability": f"{props.major}.{props.minor}", "l2_bytes": l2_bytes,
           "torch": torch.__version__, "cuda": torch.version.cuda, "triton": triton_version,
           "python": platform.python_version(), "commit": commit,
           "slots": "contiguous (--contiguous-slots)" if args.contiguous_slots else "random permutation",
           "kv_dtype": args.kv_dtype,
           "date": datetime.datetime.now().isoformat(timespec="seconds")}
    print(f"device: {props.name} ({props.multi_processor_count} SMs, L2 {l2_bytes >> 20} MiB, "
          f"sm_{props.major}{props.minor}); torch {torch.__version__} cuda {torch.version.cuda} "
          f"triton {triton_version}; commit {commit}; {env['date']}")
    if args.contiguous_slots:
        print("SLOTS CONTIGUOUS (--contiguous-slots): not SPEC's fragmented cache; a diagnostic run")
    if args.kv_dtype != "bf16":
        print(f"KV CACHE {args.kv_dtype.upper()} (--kv-dtype): not SPEC section 6's bf16 bars; "
              "no peer runs (each takes a bf16 cache)")

    # -- ours --
    lib, lib_reason = None, ""
    lib_path = find_library(args.lib)
    if lib_path is None:
        lib_reason = "library not found (--lib, $KDTREE_KERNELS_LIB, build-gpu/, build/)"
    else:
        try:
            lib = KdtreeLib(lib_path)
            lib.prepare(args.device)
            print(f"ours: {lib.path}\n      {lib.build_info()}\n      binding: {lib.binding}")
        except Exception as e:
            lib, lib_reason = None, f"{lib_path}: {type(e).__name__}: {e}"
    if lib is None:
        print("!" * 78 + f"\n!!! OURS DOES NOT RUN: {lib_reason}\n" + "!" * 78)
    compares = load_compare_libs(args)

    # -- ceilings --
    bw = copy_bandwidth(dev)
    mma, mma_log, mma_measured = mma_peak(args.device)
    print(f"ceilings: BW {bw / 1e12:.3f} TB/s (4 GiB device-to-device copy, read + written); "
          f"MMA {mma / 1e12:.1f} TFLOP/s (mma.sync m16n8k16 bf16)")
    if not mma_measured:
        print("!" * 78 + "\n!!! MMA PEAK NOT MEASURED: using the SPEC's nominal "
              f"{NOMINAL_MMA_FLOP_PER_S / 1e12:.0f} TFLOP/s. Why:\n{mma_log}\n" + "!" * 78)
    else:
        print("      " + mma_log.replace("\n", "\n      "))

    # Every peer takes a bf16 cache: none runs beside another KV dtype.
    peers_wanted = ([p for p in args.peers.split(",") if p and p != "none"]
                    if args.kv_dtype == "bf16" else [])
    peer_classes = [P for P in PEERS if P.name in peers_wanted]
    timer = Timer(dev)
    clocks = ClockSampler(args.device)  # the SM clock of each timed loop (resolved after the shapes)
    shape_results = []

    for shape in select(args.shapes):
        t_shape = time.time()
        case = build_case(shape, args.seed, args.contiguous_slots, args.kv_dtype)
        fl = floor_of(case, bw, mma)
        res = {"meta": shape_meta(case, fl), "ours": None, "peers": {}, "splits": None}
        n_sets = input_sets_for(case, fl, l2_bytes)
        sets = [make_input_set(case, k, dev) for k in range(n_sets)]
        res["meta"]["input_sets"] = n_sets
        ref_out, ref_lse = reference(sets[0])
        causal_ref = None

        # ---- ours, and other builds of the library (--compare-lib) ----
        # Interleaved: each checked here, then timed together below.
        interleave = (args.interleave and bool(compares)) or bool(args.interleave_peer)
        to_time = []
        if lib is None:
            res["ours"] = {"ran": False, "reason": lib_reason}
        else:
            try:
                res["ours"], second = run_ours(lib, sets, fl, ref_out, ref_lse, timer, quick,
                                               args.sweep_splits and not interleave,
                                               timed=not interleave)
                if interleave:
                    to_time.append((res["ours"], second))
                else:
                    res["splits"] = second
            except Exception as e:
                traceback.print_exc()
                res["ours"] = {"ran": False, "reason": f"{type(e).__name__}: {e}"}
            torch.cuda.empty_cache()
        if compares:
            res["compare"] = {}
        for label, clib, reason in compares:
            entry = {"ran": False, "reason": reason}
            if clib is not None:
                try:
                    entry, call = run_ours(clib, sets, fl, ref_out, ref_lse, timer, quick, False,
                                           timed=not interleave)
                    if interleave:
                        to_time.append((entry, call))
                except Exception as e:
                    traceback.print_exc()
                    entry = {"ran": False, "reason": f"{type(e).__name__}: {e}"}
                torch.cuda.empty_cache()
            res["compare"][label] = entry

        # ---- peers ----
        for P in peer_classes:
            entry = {"ran": False}
            try:
                peer = P(sets[0])
            except ImportError as e:
                entry["reason"] = f"not importable ({e})"
                res["peers"][P.name] = entry
                continue
            except Exception as e:
                entry["reason"] = f"setup failed: {type(e).__name__}: {e}"
                res["peers"][P.name] = entry
                continue
            try:
                peer()
                torch.cuda.synchronize()
                if peer.tree_mask:
                    ref = ref_out
                else:
                    if causal_ref is None:
                        causal_ref = reference(sets[0], causal_masks(case))[0]
                    ref = causal_ref
                err = rel_frobenius(peer.out.float(), ref)
                entry = {"ran": True, "err": err, "mask": "tree" if peer.tree_mask else "causal tail",
                         "note": getattr(peer, "note", "") or getattr(peer, "how", "")}
                if interleave and P.name in args.interleave_peer:
                    to_time.append((entry, peer))  # timed below, in ours' loop
                else:
                    est = timer.estimate_ms(peer)
                    iters = iterations_for(est, P.budget_ms * quick, P.min_iters, P.max_iters)
                    times = timer.cold_ms(peer, iters, warmup=1)
                    ms = median(times)
                    entry.update({"ms": ms, "iters": iters, "spread": spread(times),
                                  "efficiency": fl.floor_ms / ms})
            except Exception as e:
                traceback.print_exc()
                entry = {"ran": False, "reason": f"failed: {type(e).__name__}: {e}"}
            del peer
            torch.cuda.empty_cache()
            res["peers"][P.name] = entry

        # ---- the interleaved loop: ours, --compare-lib builds, --interleave-peer peers ----
        if to_time:
            try:
                time_interleaved(to_time, fl, timer, quick)
            except Exception as e:
                traceback.print_exc()
                for entry, _ in to_time:
                    entry.update({"ran": False, "reason": f"interleaved timing: {type(e).__name__}: {e}"})
            del to_time
            torch.cuda.empty_cache()
        for entry in res.get("compare", {}).values():
            if entry.get("ran") and res["ours"].get("ran"):
                entry["ours_speedup"] = entry["ms"] / res["ours"]["ms"]
        ours = res["ours"]
        for name, entry in res["peers"].items():
            if entry.get("ran") and ours and ours.get("ran"):
                entry["speedup"] = entry["ms"] / ours["ms"]
        res["seconds"] = time.time() - t_shape
        shape_results.append(res)
        print_shape_line(res)
        del sets, ref_out, ref_lse, causal_ref
        torch.cuda.empty_cache()

    clocks.stop()
    for res in shape_results:  # ours and each --compare-lib that run_ours timed
        for entry in [res["ours"] or {}, *res.get("compare", {}).values()]:
            window = entry.pop("clock_window", None)
            if window is not None:
                entry["clock"] = clocks.window(*window)
    report = {"dry_run": False, "env": env, "bw_bytes_per_s": bw, "mma_flop_per_s": mma,
              "ceilings_source": "measured" if mma_measured else "BW measured, MMA nominal",
              "mma_log": mma_log, "library": lib.path if lib else None,
              "library_build_info": lib.build_info() if lib else None,
              "binding": lib.binding if lib else None, "shapes": shape_results}
    if compares:
        report["compare_libs"] = [
            {"label": label, "path": clib.path if clib else path,
             "build_info": clib.build_info() if clib else None,
             "binding": clib.binding if clib else None, "reason": reason}
            for (label, clib, reason), (_, path) in zip(compares, args.compare)]
    report["summary"] = summarize(shape_results)
    report["seconds"] = time.time() - t_start
    print_report(report, args, peer_classes)
    write_outputs(args, report)

    if lib is None or not any(r["ours"] and r["ours"].get("ran") for r in shape_results):
        return 2
    if any(r["ours"] and r["ours"].get("ran") and not r["ours"]["correct"] for r in shape_results):
        return 1
    if any(c.get("ran") and not c["correct"] for r in shape_results
           for c in r.get("compare", {}).values()):
        return 1
    return 0


def load_compare_libs(args) -> List[Tuple[str, Optional[object], str]]:
    """(label, KdtreeLib or None, why not) per --compare-lib. Each is a separate
    load of another file: only kdtree_* leave the library and its cudart is
    static, so two builds run side by side without sharing state."""
    from ours import KdtreeLib

    loaded = []
    for label, path in args.compare:
        clib, reason = None, ""
        if not Path(path).is_file():
            reason = f"{path}: not found"
        else:
            try:
                clib = KdtreeLib(path)
                clib.prepare(args.device)
                print(f"{label}: {clib.path}\n      {clib.build_info()}\n      binding: "
                      f"{clib.binding}")
            except Exception as e:
                clib, reason = None, f"{path}: {type(e).__name__}: {e}"
        if clib is None:
            print("!" * 78 + f"\n!!! {label.upper()} DOES NOT RUN: {reason}\n" + "!" * 78)
        loaded.append((label, clib, reason))
    return loaded


def run_ours(lib, sets, fl, ref_out, ref_lse, timer, quick, sweep_splits, timed=True):
    """Check and time one build of the library on one shape (ours, or one of
    --compare-lib, which never sweeps); optionally sweep num_splits. With
    timed=False only the checks: the second value is then the call to time
    (rotating over the input sets), for time_interleaved."""
    import torch

    from inputs import lse_max_abs, rel_frobenius
    from ours import OursRunner
    from timing import iterations_for, median

    dev = sets[0].q.device
    runners = [OursRunner(lib, s, 0) for s in sets]
    variants = {}
    if sweep_splits:
        for ns in SPLIT_VARIANTS:
            try:
                variants[ns] = OursRunner(lib, sets[0], ns)
            except Exception as e:
                variants[ns] = f"{type(e).__name__}: {e}"
    sizes = [r.workspace_bytes for r in runners]
    sizes += [v.workspace_bytes for v in variants.values() if not isinstance(v, str)]
    workspace = torch.empty(max(sizes + [16]), dtype=torch.uint8, device=dev)  # once per shape
    for r in runners:
        r.bind_workspace(workspace)
    for v in variants.values():
        if not isinstance(v, str):
            v.bind_workspace(workspace)

    def check(runner):
        runner.poison()
        runner()
        torch.cuda.synchronize()
        finite = bool(torch.isfinite(runner.out).all()) and bool(torch.isfinite(runner.lse).all())
        err = rel_frobenius(runner.out.float(), ref_out)
        lse_err = lse_max_abs(runner.lse, ref_lse)
        flag = int(runner.error_flag.item())
        ok = finite and err <= OUT_TOLERANCE and lse_err <= LSE_TOLERANCE and flag == 0
        return {"err": err, "lse_err": lse_err, "error_flag": flag, "finite": finite, "correct": ok}

    result = {"ran": True, "workspace_bytes": sizes[0], **check(runners[0])}
    # bitwise determinism at the auto split (SPEC section 2)
    first = runners[0].out.clone()
    runners[0]()
    torch.cuda.synchronize()
    result["deterministic"] = bool(torch.equal(first, runners[0].out))
    del first

    turn = [0]

    def rotating():
        runners[turn[0] % len(runners)]()
        turn[0] += 1

    if not timed:
        return result, rotating
    est = timer.estimate_ms(rotating)
    iters = iterations_for(est, 400.0 * quick, 10, 200)
    t0 = time.time()
    times = timer.cold_ms(rotating, iters)
    result["clock_window"] = (t0, time.time())  # (time.time() of the cold loop; see gpu_run)
    result.update(timing_fields(times, fl))
    ms = result["ms"]

    if len(runners) > 1:  # a short shape: back-to-back graph replays, rotated sets
        calls = max(16, len(runners))
        replays = max(3, min(100, int(60.0 * quick / max(ms * calls, 1e-3))))
        per_call = timer.graph_ms(runners, calls_per_graph=calls, replays=replays)
        result.update({"graph_ms": median(per_call), "graph_calls": calls,
                       "graph_replays": replays, "graph_efficiency": fl.floor_ms / median(per_call)})

    splits = None
    if variants:
        splits = {}
        for ns, runner in variants.items():
            label = "auto" if ns == 0 else str(ns)
            if isinstance(runner, str):
                splits[label] = {"ran": False, "reason": runner}
                continue
            try:
                c = check(runner)
                est = timer.estimate_ms(runner)
                t = timer.cold_ms(runner, iterations_for(est, 120.0 * quick, 5, 60))
                splits[label] = {"ran": True, "ms": median(t), "workspace_bytes":
                                 runner.workspace_bytes, **c}
            except Exception as e:
                splits[label] = {"ran": False, "reason": f"{type(e).__name__}: {e}"}
    return result, splits


def timing_fields(times, fl) -> Dict:
    """A result's timing entries from its per-call cold times (ms)."""
    from timing import median, spread

    ms = median(times)
    return {"ms": ms, "iters": len(times), "spread": spread(times),
            "efficiency": fl.floor_ms / ms, "gbps": fl.bytes / (ms * 1e-3) / 1e9,
            "tflops": fl.flops / (ms * 1e-3) / 1e12}


def time_interleaved(entries, fl, timer, quick) -> None:
    """Time (result, call) pairs of run_ours(timed=False) in one interleaved
    loop (Timer.cold_ms_interleaved); each result gets its timing entries."""
    from timing import iterations_for

    est = max(timer.estimate_ms(call) for _, call in entries)
    iters = iterations_for(est, 400.0 * quick, 10, 200)
    all_times = timer.cold_ms_interleaved([call for _, call in entries], iters)
    for (result, _), times in zip(entries, all_times):
        result.update(timing_fields(times, fl))
        result["interleaved"] = True


def summarize(shape_results) -> Dict:
    ours = {r["meta"]["id"]: r["ours"] for r in shape_results if r["ours"] and r["ours"].get("ran")}
    effs = [o["efficiency"] for o in ours.values()]
    summary = {"geomean_efficiency": geomean(effs), "min_efficiency": min(effs) if effs else None,
               "shapes_run": sorted(ours), "all_correct": all(o["correct"] for o in ours.values())}
    for name in ("triton", "torch", "flashmla", "flashinfer"):
        speedups = [r["peers"][name]["speedup"] for r in shape_results
                    if name in r["peers"] and "speedup" in r["peers"][name]]
        summary[f"vs_{name}_geomean"] = geomean(speedups)
        summary[f"vs_{name}_shapes"] = len(speedups)

    # The bars of SPEC section 6 (those this run can judge).
    bars = {}
    if effs:
        bars["geomean efficiency >= 0.60"] = summary["geomean_efficiency"] >= 0.60
        bars["every shape efficiency >= 0.40"] = summary["min_efficiency"] >= 0.40
        if summary["vs_triton_geomean"] is not None:
            bars["vs SGLang Triton geomean >= 30x"] = summary["vs_triton_geomean"] >= 30
        if summary["vs_torch_geomean"] is not None:
            bars["vs PyTorch geomean >= 5x"] = summary["vs_torch_geomean"] >= 5
        hopper = [sid for sid in ours if sid in FLASHMLA_SPEC_EFFICIENCY and sid != "S8"]
        if hopper:
            bars["Hopper: >= FlashMLA (SPEC) efficiency on " + ",".join(sorted(hopper))] = all(
                ours[s]["efficiency"] >= FLASHMLA_SPEC_EFFICIENCY[s] for s in hopper)
        if len(ours) == 8:
            bars["Hopper: geomean efficiency >= 0.90 (S1-S8)"] = summary["geomean_efficiency"] >= 0.90
        if "S8" in ours:
            bars[f"Hopper: S8 <= {FLASHMLA_SPEC_S8_MS / 2:.4f} ms (2x FlashMLA)"] = (
                ours["S8"]["ms"] <= FLASHMLA_SPEC_S8_MS / 2)
        bars["every checked output correct"] = summary["all_correct"]
    summary["bars"] = bars

    for label in compare_labels(shape_results):
        runs = {r["meta"]["id"]: r["compare"][label] for r in shape_results
                if r["compare"][label].get("ran")}
        c_effs = [c["efficiency"] for c in runs.values()]
        summary.setdefault("compare", {})[label] = {
            "geomean_efficiency": geomean(c_effs),
            "min_efficiency": min(c_effs) if c_effs else None, "shapes_run": sorted(runs),
            "all_correct": all(c["correct"] for c in runs.values()),
            "ours_speedup_geomean": geomean([c.get("ours_speedup") for c in runs.values()])}
    return summary


def compare_labels(shape_results) -> List[str]:
    """The --compare-lib labels, in the order given (every shape has them all)."""
    return list(shape_results[0].get("compare", {})) if shape_results else []


# --------------------------------------------------------------------------- #
# Printing and files                                                          #
# --------------------------------------------------------------------------- #

def print_shape_line(res) -> None:
    m, o = res["meta"], res["ours"] or {}
    if o.get("ran"):
        ours = (f"ours {o['ms']:.4f} ms eff {o['efficiency']:.3f} err {o['err']:.2e} "
                f"{'ok' if o['correct'] else 'FAIL'}")
    else:
        ours = f"ours did not run ({o.get('reason', '?')})"
    for label, c in res.get("compare", {}).items():
        if c.get("ran"):
            ours += (f"; {label} {c['ms']:.4f} ms eff {c['efficiency']:.3f} err {c['err']:.2e} "
                     f"{'ok' if c['correct'] else 'FAIL'}")
        else:
            ours += f"; {label} did not run ({c.get('reason', '?')})"
    peers = "; ".join(f"{n} {e['ms']:.3f} ms" if e.get("ran") else f"{n} -"
                      for n, e in res["peers"].items())
    print(f"[{m['id']}] floor {m['floor_ms']:.4f} ms ({m['bound']}); {ours}; {peers} "
          f"({res['seconds']:.1f} s)", flush=True)


def table_rows(report) -> List[List[str]]:
    rows = []
    for r in report["shapes"]:
        m, o, p = r["meta"], r["ours"] or {}, r["peers"]

        def peer_cols(name):
            e = p.get(name, {})
            if not e.get("ran"):
                return ["-", "-"]
            return [fmt(e["ms"], ".3f"), fmt(e.get("speedup"), ".1f") + "x" if e.get("speedup") else "-"]

        ran = o.get("ran")
        rows.append([
            m["id"], f"{m['B']}x{m['H']}x{m['q']}x{m['P']}",
            fmt(o.get("ms"), ".4f") if ran else "-",
            fmt(o.get("graph_ms"), ".4f") if ran else "-",
            fmt(m["floor_ms"], ".4f"), m["bound"][:3],
            fmt(o.get("efficiency"), ".3f") if ran else "-",
            fmt((o.get("clock") or {}).get("sm_mhz"), ".0f") if ran else "-",
            fmt(o.get("gbps"), ".0f") if ran else "-",
            fmt(o.get("tflops"), ".0f") if ran else "-",
            (fmt(o.get("err"), ".1e") + (" ok" if o.get("correct") else " FAIL")) if ran else "-",
            *peer_cols("torch"), *peer_cols("triton"),
            fmt(p.get("flashmla", {}).get("ms"), ".4f") if p.get("flashmla", {}).get("ran") else "-",
            fmt(m.get("flashmla_spec_efficiency"), ".3f"),
        ])
        for label in compare_labels(report["shapes"]):
            c = r["compare"][label]
            if c.get("ran"):
                rows[-1] += [fmt(c["ms"], ".4f") + ("" if c["correct"] else " FAIL"),
                             fmt(c["efficiency"], ".3f")]
            else:
                rows[-1] += ["-", "-"]
    return rows


TABLE_HEADER = ["shape", "BxHxqxP", "ours ms", "graph ms", "floor ms", "bnd", "eff", "smi MHz", "GB/s",
                "TFLOP/s", "err", "torch ms", "vs torch", "triton ms", "vs triton",
                "flashmla ms", "FlashMLA eff (SPEC)"]


def table_header(report) -> List[str]:
    """TABLE_HEADER, then "LABEL ms", "LABEL eff" per --compare-lib."""
    extra = [f"{label} {col}" for label in compare_labels(report["shapes"])
             for col in ("ms", "eff")]
    return TABLE_HEADER + extra


def summary_lines(report) -> List[str]:
    s = report["summary"]

    def x(v):
        return f"{v:.1f}x" if v is not None else "- (peer did not run)"

    lines = [
        f"geomean efficiency: {fmt(s['geomean_efficiency'], '.3f')}",
        f"min efficiency: {fmt(s['min_efficiency'], '.3f')}",
        f"vs triton geomean: {x(s['vs_triton_geomean'])}",
        f"vs torch geomean: {x(s['vs_torch_geomean'])}",
    ]
    if s.get("vs_flashmla_geomean") is not None:
        # (two decimals: it sits near 1, where one decimal says nothing)
        lines.append(f"vs flashmla geomean: {s['vs_flashmla_geomean']:.2f}x (causal tail)")
    for label, c in s.get("compare", {}).items():
        lines.append(f"{label} geomean efficiency: {fmt(c['geomean_efficiency'], '.3f')}")
    return lines


def markdown_table(report) -> str:
    env = report["env"]
    out = [f"Measured {env['date']} on {env['device']}, commit {env['commit']}: "
           f"BW {report['bw_bytes_per_s'] / 1e12:.2f} TB/s, MMA "
           f"{report['mma_flop_per_s'] / 1e12:.0f} TFLOP/s ({report['ceilings_source']}).", "",
           "| " + " | ".join(table_header(report)) + " |",
           "|" + "|".join("---" for _ in table_header(report)) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in table_rows(report)]
    out.append("")
    out += [f"- {line}" for line in summary_lines(report)]
    return "\n".join(out)


def print_report(report, args, peer_classes) -> None:
    env = report["env"]
    print()
    print("=" * 100)
    rows = table_rows(report)
    header = table_header(report)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(header)]
    print("  ".join(h.rjust(w) for h, w in zip(header, widths)))
    for row in rows:
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
    print("=" * 100)

    # which peers ran, and why not
    for P in peer_classes:
        entries = [(r["meta"]["id"], r["peers"].get(P.name, {})) for r in report["shapes"]]
        ran = [sid for sid, e in entries if e.get("ran")]
        if ran:
            notes = {e.get("note") for _, e in entries if e.get("note")}
            errs = ", ".join(f"{sid} {e['err']:.1e}" for sid, e in entries if e.get("ran"))
            mask = next(e["mask"] for _, e in entries if e.get("ran"))
            print(f"peer {P.name}: ran on {','.join(ran)} ({mask}; err vs reference: {errs})"
                  + (f" [{'; '.join(sorted(notes))}]" if notes else ""))
        not_ran = [(sid, e.get("reason", "?")) for sid, e in entries if not e.get("ran")]
        if not_ran:
            reasons = sorted({why for _, why in not_ran})
            print(f"peer {P.name}: did not run on {','.join(s for s, _ in not_ran)}: "
                  + " | ".join(reasons))

    def check_line(name, shape_id, e, bounds, tail):
        """One library's correctness and timing facts on one shape."""
        out_bound = f" (<= {OUT_TOLERANCE})" if bounds else ""
        lse_bound = f" (<= {LSE_TOLERANCE})" if bounds else ""
        return (f"{name} {shape_id}: err {e['err']:.2e}{out_bound}, lse err {e['lse_err']:.2e}{lse_bound}, "
                f"error_flag {e['error_flag']}, finite {e['finite']}, deterministic {e['deterministic']}, "
                f"spread {e['spread']:.1%} over {e['iters']} iters, {tail}"
                + ("" if e["correct"] else "   <-- INCORRECT"))

    for r in report["shapes"]:
        o = r["ours"] or {}
        if o.get("ran"):
            print(check_line("ours", r["meta"]["id"], o, True, f"workspace {o['workspace_bytes']} B"))

    for c in report.get("compare_libs", []):
        print(f"compared {c['label']}: {c['path']}: "
              + (f"did not run ({c['reason']})" if c["reason"]
                 else f"{c['build_info']}; binding: {c['binding']}"))
        for r in report["shapes"]:
            e = r["compare"][c["label"]]
            if e.get("ran"):
                print(check_line(c["label"], r["meta"]["id"], e, False,
                                 f"ours {fmt(e.get('ours_speedup'), '.2f')}x as fast"))
            elif not c["reason"]:  # loaded, failed on this shape
                print(f"{c['label']} {r['meta']['id']}: did not run ({e.get('reason', '?')})")

    if any(r.get("splits") for r in report["shapes"]):
        labels = [("auto" if ns == 0 else str(ns)) for ns in SPLIT_VARIANTS]
        print("\nnum_splits sweep (ms, cold; * best; ! incorrect):")
        print("shape " + "".join(f"{lab:>10}" for lab in labels))
        for r in report["shapes"]:
            sp = r.get("splits")
            if not sp:
                continue
            best = min((v["ms"] for v in sp.values() if v.get("ran")), default=None)
            cells = []
            for lab in labels:
                v = sp.get(lab, {})
                if not v.get("ran"):
                    cells.append(f"{'-':>10}")
                    continue
                mark = ("*" if v["ms"] == best else "") + ("" if v["correct"] else "!")
                cells.append(f"{v['ms']:.4f}{mark}".rjust(10))
            print(f"{r['meta']['id']:5} " + "".join(cells))
        for r in report["shapes"]:
            for lab, v in (r.get("splits") or {}).items():
                if not v.get("ran"):
                    print(f"  {r['meta']['id']} num_splits {lab}: {v['reason']}")

    if args.markdown:
        print("\n" + markdown_table(report) + "\n")

    print(f"\ndevice: {env['device']}; date: {env['date']}; commit: {env['commit']}; "
          f"run took {report['seconds']:.0f} s")
    print(f"measured BW: {report['bw_bytes_per_s'] / 1e12:.3f} TB/s; measured MMA: "
          f"{report['mma_flop_per_s'] / 1e12:.1f} TFLOP/s ({report['ceilings_source']})")
    for name, ok in report["summary"]["bars"].items():
        print(f"bar {'PASS' if ok else 'FAIL'}: {name}")
    for line in summary_lines(report):
        print(line)


def write_outputs(args, report) -> None:
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(to_jsonable(report), f, indent=1)
        print(f"wrote {args.json}")
    if args.plot:
        try:
            from plot import plot_report
            plot_report(to_jsonable(report), args.plot)
            print(f"wrote {args.plot}")
        except ImportError as e:
            print(f"no plot: {e}")


def main(argv=None) -> int:
    args = parse_args(argv)
    sys.path[1:1] = [str(Path(p).resolve()) for p in args.site]  # after bench/ itself
    if args.dry_run:
        return dry_run(args)
    return gpu_run(args)


if __name__ == "__main__":
    sys.exit(main())
