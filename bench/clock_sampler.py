"""The SM clock, board power and the driver's clock-event reasons while the
benchmark times a call, from nvidia-smi sampled in the background (every
20 ms by default).

The H200 runs long tensor-bound calls at its 700 W cap, where the SM clock
falls from 1.98 GHz to ~1.6-1.8 GHz over a sustained run (docs/perf_notes.md,
session 29), so a figure timed after a hot shape reads lower than the same
kernel timed cool. bench.py records the clock of each shape's timed loop
beside its time; probes/sustained.py prints a whole summary of a long run.
nvidia-smi's clocks.sm is the clock the driver set: under the cap the SMs'
own clock (%clock64 over %globaltimer) read 7-14% lower in the same kind of
run, so a window says whether a loop met the cap, not exactly how fast the
SMs ran. Without nvidia-smi the sampler is off and every window is None.
"""

import datetime
import shutil
import statistics
import subprocess
import tempfile
from typing import Dict, List, Optional

QUERY = "timestamp,utilization.gpu,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active"
FIELDS = ("util", "sm_mhz", "watts", "celsius")

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
    """One dict per well-formed line (t: epoch seconds, util, sm_mhz, watts, celsius, reasons);
    nvidia-smi's timestamps are local time, as time.time() is once converted back. Lines it
    could not fill ([N/A]) are skipped."""
    samples = []
    for line in lines:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 2 + len(FIELDS):
            continue
        try:
            sample = {"t": datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()}
            sample.update((name, float(v)) for name, v in zip(FIELDS, parts[1:-1]))
            sample["reasons"] = int(parts[-1], 16)
        except ValueError:
            continue
        samples.append(sample)
    return samples


def window(samples: List[Dict[str, float]], t0: float, t1: float) -> Optional[Dict[str, object]]:
    """The samples in [t0, t1]: the SM clock (median, [min, max]), the median power, the peak
    temperature and the share of samples with each clock-event reason; None when none fell in it."""
    inside = [s for s in samples if t0 <= s["t"] <= t1]
    if not inside:
        return None
    mhz = [s["sm_mhz"] for s in inside]
    shares = {name: sum(1 for s in inside if s["reasons"] & bit) / len(inside) for bit, name in REASONS.items()}
    return {"sm_mhz": statistics.median(mhz), "sm_mhz_range": [min(mhz), max(mhz)],
            "watts": statistics.median(s["watts"] for s in inside), "max_celsius": max(s["celsius"] for s in inside),
            "samples": len(inside), "reasons": {name: share for name, share in shares.items() if share > 0}}


def describe(w: Optional[Dict[str, object]]) -> str:
    """One line for a window (window()'s dict), or why there is none."""
    if w is None:
        return "no nvidia-smi sample in the window"
    lo, hi = w["sm_mhz_range"]
    reasons = ", ".join(f"{name} {share:.0%}" for name, share in w["reasons"].items()) or "none"
    return (f"SM {w['sm_mhz']:.0f} MHz ({lo:.0f}-{hi:.0f}), {w['watts']:.0f} W, up to {w['max_celsius']:.0f} C "
            f"over {w['samples']} samples; clock-event reasons: {reasons}")


class ClockSampler:
    """nvidia-smi --query-gpu=QUERY every period_ms for one device, into a temporary file. Windows are
    read after stop(): nvidia-smi's writes to a file may sit in its buffer while it runs."""

    def __init__(self, device_index: int, period_ms: int = 20):
        self._proc = None
        self._out = tempfile.NamedTemporaryFile(mode="w+", prefix="kdtree_clocks_", suffix=".csv")
        smi = shutil.which("nvidia-smi")
        if smi:
            try:
                self._proc = subprocess.Popen(
                    [smi, "-i", str(device_index), f"--query-gpu={QUERY}", "--format=csv,noheader,nounits",
                     "-lms", str(period_ms)], stdout=self._out, stderr=subprocess.DEVNULL)
            except OSError:
                self._proc = None
        self._samples: Optional[List[Dict[str, float]]] = None

    def stop(self) -> None:
        """Ends the sampling and reads what nvidia-smi wrote."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._samples is None:
            self._out.seek(0)
            self._samples = parse(self._out.readlines()) if self._proc is not None else []
            self._out.close()

    def window(self, t0: float, t1: float) -> Optional[Dict[str, object]]:
        """window() over [t0, t1] (time.time() seconds) of this run's samples; stops the sampling."""
        self.stop()
        return window(self._samples, t0, t1)
