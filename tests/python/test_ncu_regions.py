"""scripts/ncu_regions.py (warp samples per stretch of SASS, from ncu's source page) on a
small CSV of the same shape: the once / loop split by executed count, stretches of once
code that skip unexecuted instructions and end at loops and unpredicated EXITs, the stall
reasons and markers each reports. Standard library only; needs no GPU and no library."""

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


def write_csv(path, gz=True):
    opener = gzip.open if gz else open
    with opener(path, "wt", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Kernel Name", "verify_paged_sm90a_pingpong_kernel"])
        w.writerow(HEADER)
        for address, source, *counts in ROWS:
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
