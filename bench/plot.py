#!/usr/bin/env python3
"""Plot a bench.py report: time per shape on a log scale, ours (and any other
build of the library given by --compare-lib) against the peers and the floor.

    python3 bench/plot.py bench.json bench.png
"""

import json
import sys
from typing import Dict, List, Optional

# (label, marker, how to get a time in ms from one shape's result)
SERIES = [
    ("ours", "o", lambda r: _ran(r.get("ours"), "ms")),
    ("ours (graph replay)", "D", lambda r: _ran(r.get("ours"), "graph_ms")),
    ("SGLang Triton", "s", lambda r: _ran(r.get("peers", {}).get("triton"), "ms")),
    ("PyTorch gather+bmm", "^", lambda r: _ran(r.get("peers", {}).get("torch"), "ms")),
    ("FlashMLA (causal tail)", "v", lambda r: _ran(r.get("peers", {}).get("flashmla"), "ms")),
    ("FlashInfer MLA (causal tail)", "P", lambda r: _ran(r.get("peers", {}).get("flashinfer"), "ms")),
    ("FlashMLA, SPEC (floor / its efficiency)", "x", lambda r: _spec_flashmla(r)),
]


def _ran(entry: Optional[Dict], key: str) -> Optional[float]:
    if not entry or not entry.get("ran"):
        return None
    return entry.get(key)


def _spec_flashmla(result: Dict) -> Optional[float]:
    meta = result["meta"]
    eff = meta.get("flashmla_spec_efficiency")
    return meta["floor_ms"] / eff if eff else None


def compare_series(report: Dict) -> List:
    """One series per other build of the library (bench.py --compare-lib)."""
    markers = "<>*hp"
    return [(f"ours, {c['label']} build", markers[k % len(markers)],
             lambda r, label=c["label"]: _ran(r.get("compare", {}).get(label), "ms"))
            for k, c in enumerate(report.get("compare_libs", []))]


def plot_report(report: Dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shapes: List[Dict] = report["shapes"]
    xs = list(range(len(shapes)))
    fig, ax = plt.subplots(figsize=(max(7.0, 1.1 * len(shapes) + 3), 5.0))

    floors = [r["meta"]["floor_ms"] for r in shapes]
    ax.hlines(floors, [x - 0.38 for x in xs], [x + 0.38 for x in xs], colors="black",
              linewidth=2.0, label="floor max(bytes/BW, flops/MMA)")
    drawn = [s for s in SERIES[:2] + compare_series(report) + SERIES[2:]
             if any(s[2](r) for r in shapes)]
    for k, (label, marker, get) in enumerate(drawn):
        offset = (k - (len(drawn) - 1) / 2) * 0.1
        pts = [(x + offset, get(r)) for x, r in zip(xs, shapes) if get(r)]
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=marker, s=36, label=label,
                   zorder=3)

    ax.set_yscale("log")
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{r['meta']['id']}\n{r['meta']['B']}x{r['meta']['H']}x"
                        f"{r['meta']['q']}x{r['meta']['P']}" for r in shapes], fontsize=8)
    ax.set_ylabel("time per call (ms, log scale)")
    env = report.get("env", {})
    title = "kdtree_verify_paged vs peers and the floor"
    if report.get("dry_run"):
        title += " (dry run: floors with nominal ceilings)"
    else:
        title += f"\n{env.get('device', '?')}, commit {env.get('commit', '?')}, {env.get('date', '')}"
    bw, mma = report.get("bw_bytes_per_s"), report.get("mma_flop_per_s")
    if bw and mma:
        title += f"; BW {bw / 1e12:.2f} TB/s, MMA {mma / 1e12:.0f} TFLOP/s"
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def main(argv: List[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        report = json.load(f)
    plot_report(report, argv[2])
    print(f"wrote {argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
