"""The card's two ceilings, measured in the same run as the kernels (SPEC section 6).

BW:  a large device-to-device copy (torch copy_ of 4 GiB, a cudaMemcpy D2D),
     bytes read plus bytes written over the median event time.
MMA: bench/mma_peak.cu compiled with nvcc for this device's arch and run: long
     independent chains of mma.sync m16n8k16 bf16 -> f32 from registers on every
     SM. If nvcc or the run fails, the SPEC's nominal value is used and the
     benchmark says so loudly.
"""

import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Tuple

import torch

from shapes import NOMINAL_MMA_FLOP_PER_S
from timing import median

HERE = Path(__file__).resolve().parent


def copy_bandwidth(device: torch.device, nbytes: int = 4 << 30, iters: int = 10) -> float:
    """Bytes per second of dst.copy_(src), counting read and written bytes."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=device).random_(0, 256)
    dst = torch.empty_like(src)
    for _ in range(2):
        dst.copy_(src)
    torch.cuda.synchronize(device)
    times = []
    for _ in range(iters):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    del src, dst
    torch.cuda.empty_cache()
    return 2.0 * nbytes / (median(times) * 1e-3)


def _nvcc() -> str:
    found = shutil.which("nvcc")
    if found:
        return found
    default = Path("/usr/local/cuda/bin/nvcc")
    return str(default) if default.exists() else ""


def mma_peak(device_index: int) -> Tuple[float, str, bool]:
    """(flop/s, log, measured). measured is False when the nominal value stands in."""
    major, minor = torch.cuda.get_device_capability(device_index)
    arch = f"sm_{major}{minor}"
    nvcc = _nvcc()
    if not nvcc:
        return NOMINAL_MMA_FLOP_PER_S, "nvcc not found", False
    with tempfile.TemporaryDirectory(prefix="kdtree_mma_peak_") as tmp:
        exe = Path(tmp) / "mma_peak"
        try:
            build = subprocess.run([nvcc, "-O3", f"-arch={arch}", "-o", str(exe),
                                    str(HERE / "mma_peak.cu")],
                                   capture_output=True, text=True, timeout=300)
            if build.returncode != 0:
                return NOMINAL_MMA_FLOP_PER_S, f"nvcc -arch={arch} failed:\n{build.stderr}", False
            run = subprocess.run([str(exe), "65536", str(device_index)],
                                 capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.SubprocessError) as e:
            return NOMINAL_MMA_FLOP_PER_S, f"{type(e).__name__}: {e}", False
        log = (run.stdout + run.stderr).strip()
        match = re.search(r"^TFLOPS\s+([0-9.]+)", run.stdout, re.MULTILINE)
        if run.returncode != 0 or not match:
            return NOMINAL_MMA_FLOP_PER_S, f"mma_peak failed (rc {run.returncode}):\n{log}", False
        return float(match.group(1)) * 1e12, log, True
