"""bench/probes/softmax_rounding.py (no GPU): the bf16 rounding it emulates, and the
order of the forms' errors on a small random case."""

import importlib.util
import pathlib

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("softmax_rounding", ROOT / "bench" / "probes" / "softmax_rounding.py")
softmax_rounding = importlib.util.module_from_spec(spec)
spec.loader.exec_module(softmax_rounding)
bf16 = softmax_rounding.bf16


def test_bf16_rounds_to_nearest_even():
    one_ulp = 2.0 ** -7  # bf16 has 8 significant bits: 1 + 2^-7 is the next value after 1
    values = np.array([1.0, 1.0 + one_ulp / 2, 1.0 + 1.5 * one_ulp, 1.0 + 0.75 * one_ulp,
                       -3.0 - one_ulp / 4, 2.0 ** -130], np.float32)
    expected = np.array([1.0, 1.0, 1.0 + 2 * one_ulp, 1.0 + one_ulp, -3.0, 2.0 ** -130], np.float32)
    # ties go to the even significand (1.0 down, 1 + 1.5 ulp up); a subnormal is kept when exact
    np.testing.assert_array_equal(bf16(values), expected)


def test_bf16_keeps_nan_and_inf():
    out = bf16(np.array([np.inf, -np.inf, np.nan], np.float32))
    assert out[0] == np.inf and out[1] == -np.inf and np.isnan(out[2])


def test_forms_order_on_a_small_case():
    e = softmax_rounding.errors(keys=512, rows=8, rng=np.random.default_rng(1))
    today_o, today_lse = e["today"]
    # P rounded to bf16 alone: O's error is that of an 8-bit significand, the
    # lse (fp32 sums) near fp32's
    assert 1e-5 < today_o < 5e-3 and today_lse < 1e-6
    # rounding the exponent to bf16 first costs O accuracy; to f16 about none
    assert e["bf16-exp"][0] > 1.5 * today_o
    assert e["f16-exp"][0] < 1.2 * today_o
    # the lse from the rounded P's sum: same O, a far larger lse error
    assert e["lse-w"][0] == today_o and e["lse-w"][1] > 100 * today_lse
