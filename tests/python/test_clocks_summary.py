"""bench/probes/clocks_summary.py (run_clocks.sh's nvidia-smi samples, no GPU) on
synthetic CSV lines: parsing, the busy filter, the clock / power spread and the
clock-event reason shares."""

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("clocks_summary", ROOT / "bench" / "probes" / "clocks_summary.py")
clocks_summary = importlib.util.module_from_spec(spec)
spec.loader.exec_module(clocks_summary)


def sample(util, mhz, watts, celsius, reasons):
    return f"2026/11/30 18:00:00.000, {util}, {mhz}, {watts}, {celsius}, 0x{reasons:016x}\n"


def test_parse_skips_malformed_lines():
    lines = [sample(100, 1755, 690.5, 61, 0x4), "garbage\n", "2026/11/30, [N/A], 1, 2, 3, 0x0\n"]
    samples = clocks_summary.parse(lines)
    assert len(samples) == 1
    assert samples[0] == {"util": 100.0, "sm_mhz": 1755.0, "watts": 690.5, "celsius": 61.0, "reasons": 0x4}


def test_summary_counts_busy_samples_only():
    lines = [sample(100, 1700, 700, 62, 0x4), sample(95, 1900, 600, 60, 0x0), sample(3, 345, 90, 40, 0x1)]
    out = clocks_summary.summarize(clocks_summary.parse(lines), busy=90)
    assert out["samples"] == 2 and out["of"] == 3
    assert out["sm_mhz"] == [1800.0, 1700.0, 1900.0]
    assert out["watts"] == [650.0, 600.0, 700.0]
    assert out["max_celsius"] == 62.0
    assert out["reasons"] == {"SW power cap": 0.5}  # idle (0x1) came from the idle sample only


def test_summary_of_an_idle_run_is_empty():
    assert clocks_summary.summarize(clocks_summary.parse([sample(0, 345, 80, 35, 0x1)]), busy=90) == {}
