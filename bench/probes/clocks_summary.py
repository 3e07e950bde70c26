#!/usr/bin/env python3
"""Summarizes nvidia-smi samples (run_clocks.sh's CSV: timestamp, utilization.gpu,
clocks.sm, power.draw, temperature.gpu, clocks_event_reasons.active) over the
samples taken while the GPU was busy (utilization >= --busy percent): the SM
clock and power (median, min, max), the peak temperature, and the share of busy
samples with each clock-event reason the driver reported.

  python3 bench/probes/clocks_summary.py /tmp/clocks/S6.csv [--busy 90]
"""
import argparse
import statistics
import sys
from typing import Dict, List

# nvidia-smi's clocks_event_reasons bits (nvml's nvmlClocksEventReasons).
REASONS = {
    0x1: "idle",
    0x2: "application clocks",
    0x4: "SW power cap",
    0x8: "HW slowdown",
    0x10: "sync boost",
    0x20: "SW thermal",
    0x40: "HW thermal",
    0x80: "HW power brake",
}


def parse(lines: List[str]) -> List[Dict[str, float]]:
    """One dict per well-formed sample; lines nvidia-smi could not fill ([N/A]) are skipped."""
    samples = []
    for line in lines:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 6:
            continue
        try:
            samples.append({"util": float(parts[1]), "sm_mhz": float(parts[2]), "watts": float(parts[3]),
                            "celsius": float(parts[4]), "reasons": int(parts[5], 16)})
        except ValueError:
            continue
    return samples


def summarize(samples: List[Dict[str, float]], busy: float) -> Dict[str, object]:
    """The busy samples' clock, power, temperature and reason shares; {} when none was busy."""
    hot = [s for s in samples if s["util"] >= busy]
    if not hot:
        return {}

    def spread(key: str) -> List[float]:
        values = [s[key] for s in hot]
        return [statistics.median(values), min(values), max(values)]

    shares = {name: sum(1 for s in hot if s["reasons"] & bit) / len(hot) for bit, name in REASONS.items()}
    return {"samples": len(hot), "of": len(samples), "sm_mhz": spread("sm_mhz"), "watts": spread("watts"),
            "max_celsius": max(s["celsius"] for s in hot),
            "reasons": {name: share for name, share in shares.items() if share > 0}}


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--busy", type=float, default=90.0, help="utilization (%%) a sample needs to count")
    args = ap.parse_args(argv)
    with open(args.csv) as f:
        out = summarize(parse(f.readlines()), args.busy)
    if not out:
        print(f"  no sample at >= {args.busy:g}% utilization")
        return 1
    mhz, watts = out["sm_mhz"], out["watts"]
    print(f"  {out['samples']} busy samples of {out['of']}: SM {mhz[0]:.0f} MHz (min {mhz[1]:.0f}, max {mhz[2]:.0f}),"
          f" {watts[0]:.0f} W (min {watts[1]:.0f}, max {watts[2]:.0f}), up to {out['max_celsius']:.0f} C")
    reasons = ", ".join(f"{name} {share:.0%}" for name, share in out["reasons"].items()) or "none"
    print(f"  clock-event reasons (share of busy samples): {reasons}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
