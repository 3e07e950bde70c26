"""bench/clock_sampler.py (nvidia-smi's clock, power and clock-event reasons beside a
timed loop; no GPU): lines parsed to epoch seconds, a window's medians, range and
reason shares, its one-line description, and a sampler without nvidia-smi that
stays off."""

import datetime
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("clock_sampler", ROOT / "bench" / "clock_sampler.py")
clock_sampler = importlib.util.module_from_spec(spec)
spec.loader.exec_module(clock_sampler)

T0 = datetime.datetime(2026, 11, 30, 18, 0, 0)


def line(seconds, mhz, watts, util=100, celsius=60, reasons=0x4):
    when = (T0 + datetime.timedelta(seconds=seconds)).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
    return f"{when}, {util}, {mhz}, {watts}, {celsius}, 0x{reasons:016x}\n"


def test_parse_reads_local_timestamps_and_skips_bad_lines():
    na = "2026/11/30 18:00:00.040, [N/A], 1980, 280, 40, 0x0000000000000000\n"
    samples = clock_sampler.parse([line(0.02, 1980, 280.5, reasons=0x1), "junk\n", na])
    assert len(samples) == 1
    s = samples[0]
    assert abs(s["t"] - (T0.timestamp() + 0.02)) < 1e-6
    assert (s["util"], s["sm_mhz"], s["watts"], s["celsius"], s["reasons"]) == (100.0, 1980.0, 280.5, 60.0, 0x1)


def test_window_takes_medians_range_and_reasons_inside_it():
    samples = clock_sampler.parse([line(0.0, 1980, 300, reasons=0), line(0.1, 1700, 690, celsius=62),
                                   line(0.2, 1740, 700, reasons=0), line(0.3, 1755, 695),
                                   line(0.5, 1980, 250, reasons=0x1)])
    t = T0.timestamp()
    out = clock_sampler.window(samples, t + 0.05, t + 0.35)
    assert out == {"sm_mhz": 1740.0, "sm_mhz_range": [1700.0, 1755.0], "watts": 695.0, "max_celsius": 62.0,
                   "samples": 3, "reasons": {"SW power cap": 2 / 3}}
    assert clock_sampler.window(samples, t + 0.6, t + 0.7) is None
    text = clock_sampler.describe(out)
    assert "SM 1740 MHz (1700-1755), 695 W, up to 62 C over 3 samples" in text and "SW power cap 67%" in text
    assert clock_sampler.describe(None) == "no nvidia-smi sample in the window"


def test_sampler_without_nvidia_smi_is_off(monkeypatch):
    monkeypatch.setattr(clock_sampler.shutil, "which", lambda name: None)
    sampler = clock_sampler.ClockSampler(0)
    assert sampler.window(0.0, 1e12) is None
    sampler.stop()  # twice is fine
