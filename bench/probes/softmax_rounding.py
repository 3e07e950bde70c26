#!/usr/bin/env python3
"""What the softmax's roundings cost in accuracy, emulated on the host (NumPy only):
the relative Frobenius error of O and the lse's largest absolute error against
fp64, on SPEC-like inputs (random normal bf16 q and keys of 576 dims, the values
the keys' first 512, DeepSeek's softmax scale), for the forms a kernel could take:

  today      exponent in fp32, P rounded to bf16 for the P V, O divided by the sum
             of the rounded P (the ones column), lse from the fp32 sum of P
  bf16-exp   the exponent rounded to bf16 first (ex2.approx.ftz.bf16x2)
  f16-exp    the exponent rounded to f16 first (ex2.approx.f16x2), P then to bf16
  lse-w      as today, but the lse from the sum of the rounded P

    python3 bench/probes/softmax_rounding.py [--keys 4096,16384] [--rows 64] [--seed 0]

docs/perf_notes.md, session 34, has what it said and what the GPU measured.
"""

import argparse
import math

import numpy as np

HEAD_DIM, VALUE_DIM = 576, 512
SCALE_LOG2 = 1.0 / math.sqrt(192.0) * 1.4426950408889634  # DeepSeek-V3's scale, in log2 units


def bf16(x) -> np.ndarray:
    """x rounded to bf16 (to nearest, ties to even), as float32; NaN and inf kept."""
    x = np.asarray(x, np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)
    return np.where(np.isfinite(x), rounded, x)


def errors(keys: int, rows: int, rng: np.random.Generator) -> dict:
    """Per form: (O's relative Frobenius error, the lse's largest absolute error in nats)."""
    q = bf16(rng.standard_normal((rows, HEAD_DIM))).astype(np.float64)
    k = bf16(rng.standard_normal((keys, HEAD_DIM))).astype(np.float64)
    v = k[:, :VALUE_DIM]
    s = q @ k.T * SCALE_LOG2
    m = s.max(axis=1, keepdims=True)
    x = s - m  # <= 0: the exponent, in log2 units
    p = np.exp2(x)
    ref_o = p @ v / p.sum(axis=1, keepdims=True)
    ref_lse = (m[:, 0] + np.log2(p.sum(axis=1))) * math.log(2.0)

    def measure(p_rounded: np.ndarray, lse_sum: np.ndarray) -> tuple:
        o = p_rounded @ v / p_rounded.sum(axis=1, keepdims=True)
        lse = (m[:, 0] + np.log2(lse_sum)) * math.log(2.0)
        return (float(np.linalg.norm(o - ref_o) / np.linalg.norm(ref_o)),
                float(np.abs(lse - ref_lse).max()))

    x32 = x.astype(np.float32)
    p32 = np.exp2(x32)
    today = bf16(p32).astype(np.float64)
    bf16_exp = bf16(np.exp2(bf16(x32))).astype(np.float64)
    f16_exp = bf16(np.exp2(x32.astype(np.float16).astype(np.float32))).astype(np.float64)
    fp32_sums = p32.astype(np.float64).sum(axis=1)
    return {
        "today": measure(today, fp32_sums),
        "bf16-exp": measure(bf16_exp, bf16_exp.sum(axis=1)),
        "f16-exp": measure(f16_exp, f16_exp.sum(axis=1)),
        "lse-w": measure(today, today.sum(axis=1)),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", default="4096,16384,131072", help="comma list of key counts")
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    print(f"{'keys':>8}  {'form':<9} {'O rel. Frobenius':>17} {'lse max abs':>12}")
    for keys in (int(n) for n in args.keys.split(",")):
        for form, (o_err, lse_err) in errors(keys, args.rows, rng).items():
            print(f"{keys:>8}  {form:<9} {o_err:>17.2e} {lse_err:>12.2e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
