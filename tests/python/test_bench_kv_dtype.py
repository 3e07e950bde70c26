"""bench.py --kv-dtype (no GPU): an fp8 e4m3 KV cache halves the floor's KV bytes
and nothing else (SPEC section 6's byte list: each KV row read once, the query,
output, lse and indices unchanged), the flops stay, and an unknown dtype is
refused by name."""

import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import bench  # noqa: E402
from shapes import HEAD_DIM, SHAPES_BY_ID, build_case, floor_of, traffic_bytes  # noqa: E402


@pytest.mark.parametrize("shape_id", ["S1", "S8"])
def test_fp8_halves_the_kv_bytes_only(shape_id):
    bf16 = build_case(SHAPES_BY_ID[shape_id], seed=0)
    fp8 = build_case(SHAPES_BY_ID[shape_id], seed=0, kv_dtype="fp8")
    assert bf16.kv_dtype == "bf16" and fp8.kv_dtype == "fp8"
    assert traffic_bytes(bf16) - traffic_bytes(fp8) == bf16.total_kv * HEAD_DIM
    a, b = floor_of(bf16, 4.27e12, 647e12), floor_of(fp8, 4.27e12, 647e12)
    assert a.flops == b.flops and a.visible_keys == b.visible_keys
    assert b.bw_s < a.bw_s


def test_unknown_kv_dtype_is_refused_by_name():
    with pytest.raises(ValueError, match="kv_dtype 'fp4'"):
        build_case(SHAPES_BY_ID["S8"], seed=0, kv_dtype="fp4")


def test_the_kv_dtype_option_parses():
    assert bench.parse_args([]).kv_dtype == "bf16"
    assert bench.parse_args(["--kv-dtype", "fp8"]).kv_dtype == "fp8"
    with pytest.raises(SystemExit):
        bench.parse_args(["--kv-dtype", "fp4"])
