"""bench/probes/tile_sweep.py's arithmetic (no GPU): tiles per block as the library's
split plan makes them (split_chunk: an even share of a request's keys rounded up to whole
64-key tiles), FlashMLA's even share per CTA (--peer flashmla), and the least-squares
line fixed + per_tile x tiles."""

import importlib.util
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
spec = importlib.util.spec_from_file_location("tile_sweep", ROOT / "bench" / "probes" / "tile_sweep.py")
tile_sweep = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tile_sweep)


def split_chunk(num_keys, num_splits, granule=64):
    """src/verify/verify_paged_args.cuh's split_chunk, written out."""
    return ((num_keys + num_splits - 1) // num_splits + granule - 1) // granule * granule


@pytest.mark.parametrize("prefix,q_len,splits,tiles", [
    (131072, 16, 33, 63),   # S1: 131088 keys over 33 splits
    (4096, 8, 1, 65),       # S7: one split of 4104 keys
    (131072, 64, 8, 257),   # S5
    (16384, 16, 4, 65),     # S2
    (63, 1, 1, 1),
    (64, 1, 1, 2),
    (100, 0, 4, 1),
])
def test_tiles_per_block_is_the_first_splits_tiles(prefix, q_len, splits, tiles):
    assert tile_sweep.tiles_per_block(prefix, q_len, splits) == tiles
    assert split_chunk(prefix + q_len, splits) // 64 == tiles


@pytest.mark.parametrize("batch,heads,q_len,prefix,parts,tiles", [
    (1, 16, 64, 131072, 8, 2049 / 8),   # S5's family: 16 row blocks, 8 parts each
    (1, 16, 16, 131072, 33, 2049 / 33),  # S1's family: 4 row blocks, 33 parts
    (8, 128, 16, 16384, 4, 8 * 257 / 4),  # S6: 32 row blocks, 4 parts crossing requests
    (1, 16, 16, 0, 33, 1 / 33),          # the tail alone
])
def test_flashmla_share_per_cta(batch, heads, q_len, prefix, parts, tiles):
    assert tile_sweep.flashmla_parts(heads, q_len, 132) == parts
    assert tile_sweep.flashmla_tiles_per_cta(batch, heads, q_len, prefix, 132) == pytest.approx(tiles)


def test_fit_recovers_a_line():
    xs = [49, 65, 97, 129, 193]
    fixed, per_tile, worst = tile_sweep.fit(xs, [31.2 + 1.753 * x for x in xs])
    assert fixed == pytest.approx(31.2)
    assert per_tile == pytest.approx(1.753)
    assert worst < 1e-9


def test_fit_reports_the_largest_residual():
    fixed, per_tile, worst = tile_sweep.fit([0, 1, 2, 3], [0.0, 1.0, 2.0, 4.0])
    assert worst == pytest.approx(max(abs(y - (fixed + per_tile * x)) for x, y in zip([0, 1, 2, 3], [0, 1, 2, 4])))
    assert worst > 0.3
