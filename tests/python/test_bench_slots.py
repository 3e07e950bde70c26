"""bench/shapes.py's KV slots (no GPU): SPEC's fragmented page_size-1 cache (a random
permutation of the pool) and bench.py --contiguous-slots (each request's keys in
consecutive slots), each with one slack slot no index refers to; and bench.py's
options for the same-clock comparison with a peer."""

import pathlib
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import bench  # noqa: E402
from shapes import SHAPES_BY_ID, build_case, random_slots  # noqa: E402


@pytest.mark.parametrize("contiguous", [False, True])
def test_slots_are_distinct_and_leave_the_slack_slot_out(contiguous):
    case = build_case(SHAPES_BY_ID["S8"], seed=3, contiguous_slots=contiguous)
    indices, slack = random_slots(case, seed=3)
    assert indices.dtype == np.int32 and indices.shape == (case.total_kv,)
    assert case.num_slots == case.total_kv + 1
    assert len(np.unique(indices)) == case.total_kv
    assert 0 <= slack < case.num_slots and slack not in set(indices.tolist())
    assert indices.min() >= 0 and indices.max() < case.num_slots


def test_contiguous_slots_give_each_request_consecutive_slots():
    case = build_case(SHAPES_BY_ID["S8"], seed=0, contiguous_slots=True)
    indices, slack = random_slots(case, seed=0)
    np.testing.assert_array_equal(indices, np.arange(case.total_kv, dtype=np.int32))
    assert slack == case.total_kv
    for b in range(case.batch):
        k0, k1 = int(case.kv_indptr[b]), int(case.kv_indptr[b + 1])
        assert np.all(np.diff(indices[k0:k1]) == 1)


def test_random_slots_are_fragmented_and_seeded():
    case = build_case(SHAPES_BY_ID["S8"], seed=0)
    a, slack_a = random_slots(case, seed=5)
    b, slack_b = random_slots(case, seed=5)
    c, _ = random_slots(case, seed=6)
    np.testing.assert_array_equal(a, b)
    assert slack_a == slack_b
    assert not np.array_equal(a, c)
    # A permutation, not runs: few neighbours are consecutive slots.
    assert np.mean(np.diff(a) == 1) < 0.01


def test_the_same_clock_options_parse():
    args = bench.parse_args(["--interleave-peer", "flashmla", "--contiguous-slots"])
    assert args.interleave_peer == ["flashmla"] and args.contiguous_slots
    args = bench.parse_args([])
    assert args.interleave_peer == [] and not args.contiguous_slots
