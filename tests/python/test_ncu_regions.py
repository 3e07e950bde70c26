"""scripts/ncu_regions.py (warp samples per stretch of SASS, from ncu's source page) on a
small CSV of the same shape: the once / loop split by executed count, stretches of once
code that skip unexecuted instructions and end at loops and unpredicated EXITs, the stall
reasons and markers each reports; with --waits, each mbarrier wait site (its try-wait,
retry branch and out-of-line retry loop summed), arrival and wgmma wait; with --by-role, the
ping-pong kernel's code split at the gather's register release and its PREEXIT. Standard library
only; needs no GPU and no library."""

import contextlib
import csv
import gzip
import importlib.util
import io
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("ncu_regions", ROOT / "scripts" / "ncu_regions.py")
ncu_regions = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ncu_regions)

HEADER = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed",
          "stall_no_inst", "stall_long_sb", "stall_lg", "stall_no_inst (Not Issued)"]

# 3 roles, 10 blocks: the entry runs 30 times per role's warp, a role's once code 10.
ROWS = [
    # address, source, samples, executed, no_inst, long_sb, lg, no_inst (not issued)
    (0x1000, "S2R R0, SR_TID.X ;", 2, 30, 1, 0, 0, 9),
    (0x1010, "USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xd8 ;", 3, 20, 3, 0, 0, 9),
    (0x1020, "LDGSTS.E.BYPASS.128 [R3], desc[UR4][R4.64] ;", 10, 10, 0, 10, 0, 9),
    (0x1030, "HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], R24 ;", 50, 400, 0, 0, 0, 0),
    (0x1040, "FMUL R1, R2, R3 ;", 40, 400, 0, 0, 0, 0),
    (0x1050, "FMUL R5, R2, R3 ;", 0, 0, 0, 0, 0, 0),  # another branch: skipped
    (0x1060, "MUFU.RCP R3, R10 ;", 20, 10, 20, 0, 0, 0),
    (0x1070, "STG.E desc[UR6][R8.64], R3 ;", 30, 10, 0, 0, 30, 0),
    (0x1080, "EXIT ;", 1, 10, 0, 0, 1, 0),
    (0x1090, "IMAD R1, R2, R3, RZ ;", 4, 10, 4, 0, 0, 0),
]


def write_csv(path, gz=True, rows=ROWS):
    opener = gzip.open if gz else open
    with opener(path, "wt", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Kernel Name", "verify_paged_sm90a_pingpong_kernel"])
        w.writerow(HEADER)
        for address, source, *counts in rows:
            w.writerow([hex(address), source, *counts])


def test_once_and_loop(tmp_path):
    path = tmp_path / "k_sass.csv.gz"
    write_csv(path)
    header, rows = ncu_regions.read_rows(str(path))
    insts, stretches = ncu_regions.analyse(header, rows, roles=3, once_factor=2.0)
    kinds = [i["kind"] for i in insts]
    # limit = 2 * 30 / 3 = 20: the entry (30) and the loop (400) are not once code.
    assert kinds == ["loop", "once", "once", "loop", "loop", "none", "once", "once", "once", "once"]
    # The unexecuted FMUL does not end the second stretch; the EXIT does.
    assert [[hex(i["address"]) for i in s] for s in stretches] == [
        ["0x1010", "0x1020"], ["0x1060", "0x1070", "0x1080"], ["0x1090"]]
    total = ncu_regions.summarize(stretches[1])
    assert total["samples"] == 51 and total["executed"] == 3
    assert total["no_inst"] == 20 and total["lg"] == 31  # not-issued columns are left out


def test_report(tmp_path):
    path = tmp_path / "k_sass.csv"
    write_csv(path, gz=False)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert ncu_regions.main([str(path), "--min-share", "0.05"]) == 0
    text = out.getvalue()
    assert "10 instructions, 160 samples" in text
    assert "once: 6 executed instructions, 68 samples (42.5%): lg 31, no_inst 27, long_sb 10" in text
    assert "loop: 3 executed instructions, 92 samples (57.5%)" in text
    assert "once from 0x1060: 3 instructions, 2 lines, 51 samples (31.9%): lg 31, no_inst 20 [EXIT STG]" in text
    assert "once from 0x1010: 2 instructions, 1 lines, 13 samples (8.1%): long_sb 10, no_inst 3 [LDGSTS SETMAXREG]" in text
    assert "0x1090" not in text  # 4 samples: under --min-share


# A score warpgroup's hand-offs as sm_90 SASS lays them out: an inline try-wait and the
# branch to its out-of-line retry loop (after the kernel's EXIT), an arrival, a wgmma wait.
WAIT_ROWS = [
    (0x2000, "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR10+0x386c0], R8 ;", 3, 100, 0, 3, 0, 0),
    (0x2010, "@!P0  BRA 0x2100 ;", 40, 100, 0, 40, 0, 0),
    (0x2020, "HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], R24 ;", 9, 100, 0, 0, 0, 0),
    (0x2030, "WARPGROUP.DEPBAR.LE gsb0, 0x0 ;", 25, 100, 0, 0, 0, 0),
    (0x2040, "FENCE.VIEW.ASYNC.S ;", 6, 100, 0, 0, 0, 0),
    (0x2050, "SYNCS.ARRIVE.TRANS64.A1T0 RZ, [UR10+0x386d0], RZ ;", 12, 100, 0, 0, 0, 0),
    (0x2060, "@P1  BRA 0x2000 ;", 1, 100, 0, 0, 0, 0),
    (0x2070, "EXIT ;", 0, 10, 0, 0, 0, 0),
    (0x2100, "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR10+0x386c0], R8 ;", 5, 20, 0, 5, 0, 0),
    (0x2110, "@!P0  BRA 0x2100 ;", 2, 20, 0, 2, 0, 0),
    (0x2120, "BRA 0x2020 ;", 1, 10, 0, 0, 0, 0),
    (0x2130, "SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR10+0x386e8], R2 ;", 4, 10, 0, 4, 0, 0),
]


def test_waits(tmp_path):
    path = tmp_path / "w_sass.csv"
    write_csv(path, gz=False, rows=WAIT_ROWS)
    header, rows = ncu_regions.read_rows(str(path))
    insts, _ = ncu_regions.analyse(header, rows)
    waits, arrivals, depbars = ncu_regions.hand_offs(insts)
    # The site at the inline branch holds its try-wait's, its own and its retry loop's
    # samples (3 + 40 + 5 + 2 + 1); a try-wait with no retry branch stands alone.
    assert waits == [(0x2010, 0x386c0, 51), (0x2130, 0x386e8, 4)]
    assert arrivals == [(0x2050, 0x386d0, 12)]
    assert depbars == [(0x2030, 25)]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert ncu_regions.main([str(path), "--waits", "--barrier-names", "0x386c0=maxA,0x386d0=P0"]) == 0
    text = out.getvalue()
    assert "0x2010 on 0x386c0 (maxA): 51 samples (47.2%)" in text
    assert "0x2050 on 0x386d0 (P0): 12 samples" in text
    assert "0x2030: 25 samples (23.1%)" in text


# The ping-pong kernel's order in the binary: prologue, the gather (from its register
# release to its PREEXIT), then the score warpgroups.
ROLE_ROWS = [
    (0x3000, "S2R R0, SR_TID.X ;", 2, 30, 1, 0, 0, 0),
    (0x3010, "USETMAXREG.DEALLOC.CTAPOOL 0x48 ;", 1, 10, 0, 0, 0, 0),
    (0x3020, "LDGSTS.E.BYPASS.128 [R3], desc[UR4][R4.64] ;", 20, 400, 2, 15, 0, 0),
    (0x3030, "PREEXIT ;", 0, 10, 0, 0, 0, 0),
    (0x3040, "USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xd8 ;", 3, 20, 3, 0, 0, 0),
    (0x3040 + 2048, "HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], R24 ;", 50, 800, 7, 30, 0, 0),
    (0x3040 + 2064, "FMUL R1, R2, R3 ;", 10, 800, 5, 0, 0, 0),
]


def test_by_role(tmp_path):
    path = tmp_path / "r_sass.csv"
    write_csv(path, gz=False, rows=ROLE_ROWS)
    header, rows = ncu_regions.read_rows(str(path))
    insts, _ = ncu_regions.analyse(header, rows)
    roles = ncu_regions.split_roles(insts)
    assert [len(roles[k]) for k in ("prologue", "gather", "score")] == [1, 3, 3]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert ncu_regions.main([str(path), "--by-role"]) == 0
    text = out.getvalue()
    assert "gather from 0x3010: 3 instructions, 21 samples (24.4%): long_sb 15, no_inst 2; no_inst 2" in text
    assert "score from 0x3040: 3 instructions, 63 samples (73.3%): long_sb 30, no_inst 15; no_inst 15" in text
    assert "score no_inst by 2 KB: +0 KB 3, +2 KB 12" in text
    # Another kernel (no register release) is named as such, not split.
    assert ncu_regions.split_roles(insts[:1]) is None
