"""bench/probes/stamps_summary.py (the stamps build's per-block timeline, no GPU) on
synthetic STAMP lines: parsing, the SM clock's rate from a block's two timer pairs,
microseconds since each block's entry, and the kernel span across blocks."""

import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("stamps_summary", ROOT / "bench" / "probes" / "stamps_summary.py")
stamps_summary = importlib.util.module_from_spec(spec)
spec.loader.exec_module(stamps_summary)

GHZ = 1.7  # clocks per ns


def block_line(block, entry_ns, entry_clock=10_000):
    """One block: point p at (p + 1) us after entry, warpgroup 0 ending at 120 us."""
    v = [entry_clock + int((p + 1) * 1000 * GHZ) for p in range(stamps_summary.NUM_POINTS)]
    v[0], v[8] = entry_ns, entry_clock
    v[4] = entry_clock + int(120_000 * GHZ)           # warpgroup 0's end
    v[9] = entry_ns + 120_000                         # ... by the global timer
    v[3] = entry_clock + int(100_000 * GHZ)           # its loop end
    v[2] = entry_clock + int(4_000 * GHZ)             # its first half
    return "STAMP %d %s\n" % (block, " ".join(map(str, v)))


def test_parse_keeps_stamp_lines_only():
    lines = ["[S1] ours 0.1 ms\n", block_line(0, 1000), "noise\n", block_line(1, 1200)]
    rows = stamps_summary.parse(lines)
    assert len(rows) == 2 and all(len(r) == stamps_summary.NUM_POINTS for r in rows)


def test_parse_rejects_a_short_line():
    with pytest.raises(ValueError):
        stamps_summary.parse(["STAMP 0 1 2 3\n"])


def test_summary_times_since_entry():
    rows = stamps_summary.parse([block_line(0, 1_000_000), block_line(1, 1_000_500)])
    s = stamps_summary.summarize(rows, tiles=64)
    assert s["blocks"] == 2
    assert s["ghz"] == pytest.approx(GHZ, rel=1e-6)
    points = s["points"]
    assert points["entry after the first block's"] == pytest.approx([0.25, 0.0, 0.5])
    assert points["block barrier passed"][0] == pytest.approx(12.0, abs=1e-3)  # point 11
    assert points["wg0: epilogue (from its loop end)"][0] == pytest.approx(20.0, abs=1e-3)
    assert s["loop_us_per_tile"] == pytest.approx(96.0 / 64, abs=1e-5)
    # The last block ends 0.5 us after the first began, 120 us after its own entry.
    assert s["span_us"] == pytest.approx(120.5, abs=1e-3)


def test_single_kernel_points():
    """--kernel single: its own labels, and warpgroup 1's epilogue from the shared loop end."""
    rows = stamps_summary.parse([block_line(0, 1_000_000)])
    s = stamps_summary.summarize(rows, tiles=8, kernel="single")
    points = s["points"]
    assert "tile 0 landed (the loop's first barrier)" in points
    assert "gather: pair 0, copy 1 issued" not in points
    # Point 6 (warpgroup 1's end) at 7 us, the loop end (point 3) at 100 us.
    assert points["wg1: epilogue (from its loop end)"][0] == pytest.approx(7.0 - 100.0, abs=1e-3)
    assert s["loop_us_per_tile"] == pytest.approx(96.0 / 8, abs=1e-5)


def merge_line(block, entry_ns, end=True, entry_clock=50_000):
    """A merge block: point p (10..15) at (p - 9) us after entry, its end at 8 us (without
    `end`, the end stamps of an earlier launch)."""
    v = [0] * stamps_summary.NUM_POINTS
    v[0], v[8] = entry_ns, entry_clock
    for p in range(10, 16):
        v[p] = entry_clock + int((p - 9) * 1000 * GHZ)
    v[4] = entry_clock + int(8_000 * GHZ)
    v[9] = entry_ns + (8_000 if end else -50_000)
    return "MSTAMP %d %s\n" % (block, " ".join(map(str, v)))


def test_merge_points_and_offsets_after_the_verify_kernel():
    """--kernel merge: MSTAMP lines apart from STAMP ones, blocks that returned early left out,
    and the merge's entry, wait and end after the verify kernel's last warpgroup-0 end."""
    lines = [block_line(0, 1_000_000), block_line(1, 1_000_500),  # verify ends at 1_120_500 ns
             merge_line(0, 1_121_500), merge_line(1, 1_122_500), merge_line(2, 1_121_000, end=False)]
    rows = stamps_summary.parse(lines, "MSTAMP")
    assert len(rows) == 3 and len(stamps_summary.parse(lines)) == 2
    s = stamps_summary.summarize_merge(rows, stamps_summary.parse(lines))
    assert s["blocks"] == 2
    assert s["ghz"] == pytest.approx(GHZ, rel=1e-6)
    assert s["points"]["past the wait for the split kernel"][0] == pytest.approx(2.0, abs=1e-3)  # point 11
    assert s["points"]["stores issued (end)"][0] == pytest.approx(8.0, abs=1e-3)
    assert s["span_us"] == pytest.approx(9.0, abs=1e-3)  # 1_121_500 -> 1_130_500
    after = s["after_verify"]
    assert after["entry"] == pytest.approx([1.5, 1.0, 2.0])
    assert after["past the wait"][0] == pytest.approx(3.5, abs=1e-3)
    assert after["end"] == pytest.approx([9.5, 9.0, 10.0])


def test_a_point_this_launch_did_not_pass_is_not_recorded(capsys):
    """A merge with one split part never writes point 15 (parts added): the value there is an
    earlier launch's, before the block's entry, and prints as not recorded, not as a time."""
    lines = [merge_line(0, 1_000_000), merge_line(1, 1_000_500)]
    lines = [line.split() for line in lines]
    for words in lines:
        words[2 + 15] = str(int(words[2 + 8]) - 123_456_789)  # (the tag and block come first)
    rows = stamps_summary.parse([" ".join(words) + "\n" for words in lines], "MSTAMP")
    s = stamps_summary.summarize_merge(rows)
    assert s["points"]["split parts added"] is None
    assert s["points"]["thread 0's splits summed"][0] == pytest.approx(5.0, abs=1e-3)  # point 14
    stamps_summary.print_points(s["points"])
    out = capsys.readouterr().out
    assert "split parts added" in out and "not recorded in this launch" in out
    assert "-" not in out.split("split parts added")[1].splitlines()[0]


def test_epilogue_by_arrival_ranks_blocks_by_the_row_sums_barrier():
    """--by-arrival: blocks sorted by when warpgroup 0 passes the row sums' barrier (point 30,
    entry offset included), each group's epilogue from that barrier to its stores issued (point 4)."""
    lines = []
    for b, (entry_ns, sums_us, end_us) in enumerate([(1_000_000, 100.0, 110.0), (1_002_000, 100.0, 103.0),
                                                     (1_000_000, 101.0, 104.0), (1_000_500, 100.0, 104.0)]):
        words = block_line(b, entry_ns).split()
        words[2 + 30] = str(10_000 + int(sums_us * 1000 * GHZ))
        words[2 + 4] = str(10_000 + int(end_us * 1000 * GHZ))
        words[2 + 9] = str(entry_ns + int(end_us * 1000))  # the global timer at that end
        lines.append(" ".join(words) + "\n")
    rows = stamps_summary.parse(lines)
    groups = stamps_summary.epilogue_by_arrival(rows, 2)
    assert len(groups) == 2
    # Arrivals (us after the first entry): 100.0 (epilogue 10 us), 100.5 (4), 101.0 (3), 102.0 (3).
    (first0, last0, epi0), (first1, last1, epi1) = groups
    assert (first0, last0) == pytest.approx((100.0, 100.5), abs=1e-3)
    assert (first1, last1) == pytest.approx((101.0, 102.0), abs=1e-3)
    assert epi0 == pytest.approx([7.0, 4.0, 10.0], abs=1e-3)
    assert epi1 == pytest.approx([3.0, 3.0, 3.0], abs=1e-3)


def pair_line(block, origin, offsets, stale=()):
    """A PSTAMP line: each pair point at `origin` + its offset in `offsets` (clocks; a point
    not named there at origin + 10 * its number); points in `stale` hold an earlier launch's value."""
    v = [origin + offsets.get(p, 10 * p) for p in range(stamps_summary.NUM_POINTS)]
    for p in stale:
        v[p] = 5
    return "PSTAMP %d %s\n" % (block, " ".join(map(str, v)))


def test_pairs_clocks_after_the_origin_and_each_half_from_its_free():
    """--kernel pairs: points in clocks after warpgroup 0's QK of pair k; per stage half the
    gather's wake and issue after its free, the reader's slack and wait; a block with a value
    from before its entry (an earlier launch) is left out."""
    # Stage 0 low: freed at 700, the gather past it at 760, copies issued at 900, warpgroup 0
    # at its wait at 1,500 and past it at 1,800.
    low = {7: 700, 13: 760, 14: 900, 22: 1500, 23: 1800}
    lines = [block_line(0, 1_000_000), block_line(1, 1_000_500), block_line(2, 1_001_000),
             pair_line(0, 200_000, low), pair_line(1, 300_000, {**low, 23: 1600}),
             pair_line(2, 400_000, low, stale=(9,))]
    rows, pair_rows = stamps_summary.parse(lines), stamps_summary.parse(lines, "PSTAMP")
    assert len(pair_rows) == 3
    s = stamps_summary.summarize_pairs(rows, pair_rows)
    assert s["blocks"] == 2
    assert s["points"]["wg0: QK of pair k done"] == [0, 0, 0]
    assert s["points"]["wg0: past pair k+1's stage 0 low wait"] == [1700, 1600, 1800]  # blocks 0 and 1
    assert s["points"]["wg1: past kP0"][0] == 90  # point 9 at its default offset
    name, woke, issue, slack, wait, total = s["halves"][0]
    assert name.startswith("stage 0 low")
    assert (woke, issue, slack, wait, total) == (60, 140, 800, 200, 1000)


def test_pairs_without_a_full_block_says_so(tmp_path, capsys, monkeypatch):
    """Blocks too short for the steady pair (or the single-warpgroup kernel's zeros): a plain
    message and exit status 1, not an empty table."""
    log = tmp_path / "S8.log"
    log.write_text(block_line(0, 1_000_000) + pair_line(0, 200_000, {}, stale=(23,)))
    monkeypatch.setattr("sys.argv", ["stamps_summary.py", str(log), "--kernel", "pairs"])
    assert stamps_summary.main() == 1
    assert "no block recorded every pair point" in capsys.readouterr().out
