"""bench/probes/ncu_raw.py (no GPU): an Nsight Compute raw page's metrics and its
largest warp-stall reasons, one launch per file."""

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("ncu_raw", ROOT / "bench" / "probes" / "ncu_raw.py")
ncu_raw = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ncu_raw)

STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
NAMES = ["ID", "Kernel Name", "a", "b", "c", "d", "e", "f", "gpu__time_duration.sum",
         STALL.format("wait"), STALL.format("long_scoreboard"), STALL.format("gmma")]
UNITS = ["", "", "", "", "", "", "", "", "us", "inst", "inst", "inst"]
VALUES = ["0", "k", "", "", "", "", "", "", "1,234.5", "2.13", "3.56", "n/a"]


def write(tmp_path, rows):
    path = tmp_path / "raw.csv"
    path.write_text("\n".join(",".join(f'"{c}"' for c in r) for r in rows) + "\n")
    return str(path)


def test_page_metrics_and_stalls(tmp_path):
    page = ncu_raw.read_page(write(tmp_path, [NAMES, UNITS, VALUES]))
    assert page["gpu__time_duration.sum"] == ("1,234.5", "us")
    assert ncu_raw.number(page["gpu__time_duration.sum"][0]) == 1234.5
    # largest first; a value that is not a number is left out
    assert ncu_raw.stalls(page, 5) == [("long_scoreboard", 3.56), ("wait", 2.13)]
    assert ncu_raw.stalls(page, 1) == [("long_scoreboard", 3.56)]


def test_side_by_side_skips_what_no_page_has(tmp_path, capsys):
    path = write(tmp_path, [NAMES, UNITS, VALUES])
    assert ncu_raw.main(["--keys", "gpu__time_duration.sum,absent.metric", f"one={path}", f"two={path}"]) == 0
    out = capsys.readouterr().out
    assert "absent.metric" not in out
    assert out.count("1,234.5") == 2
    assert "stalls two (warps per issue): long_scoreboard 3.56, wait 2.13" in out


def test_a_page_without_a_launch(tmp_path, capsys):
    path = write(tmp_path, [NAMES, UNITS])
    assert ncu_raw.read_page(path) == {}
    assert ncu_raw.main([f"empty={path}"]) == 0
    assert "empty: no ncu rows" in capsys.readouterr().out


def test_metrics_by_pattern(tmp_path, capsys):
    path = write(tmp_path, [NAMES, UNITS, VALUES])
    # the named key once, then those the pattern adds, sorted
    assert ncu_raw.main(["--keys", "gpu__time_duration.sum", "--like", "^smsp__.*(wait|gmma)", f"one={path}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[1:4]] == ["gpu__time_duration.sum", STALL.format("gmma"), STALL.format("wait")]


def test_memory_pattern():
    import re
    pattern = re.compile(ncu_raw.MEMORY_PATTERN)
    for name in ["dram__bytes_read.sum", "lts__t_sectors_srcunit_tex_lookup_miss.sum", "lts__t_requests.sum",
                 "lts__t_sector_hit_rate.pct", "l1tex__m_xbar2l1tex_read_sectors_mem_lg_op_ld.sum",
                 "lts__t_sectors.avg.pct_of_peak_sustained_elapsed"]:
        assert pattern.search(name), name
    for name in ["lts__t_sectors_srcunit_tex_op_atom_dot_cas.sum", "lts__t_sectors.max.pct_of_peak_sustained_elapsed",
                 "gpu__time_duration.sum", "dram__bytes.sum.per_second"]:
        assert not pattern.search(name), name
