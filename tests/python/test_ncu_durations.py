"""bench/probes/ncu_durations.py (no GPU): kernel launches named by their
fragment, medians per kernel in microseconds, a call as the sum of its
kernels, the tile counts from tile_sweep.py's line, and both sides' lines."""

import importlib.util
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "probes"))
spec = importlib.util.spec_from_file_location("ncu_durations", ROOT / "bench" / "probes" / "ncu_durations.py")
ncu_durations = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ncu_durations)

HEAD = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
        '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


def row(i, kernel, value, unit="ns", metric="gpu__time_duration.sum"):
    return (f'"{i}","1","python3","host","{kernel}","1","7","(384, 1, 1)","(16, 1, 8)","0","9.0",'
            f'"Command line profiler metrics","{metric}","{unit}","{value}"')


def write(tmp_path, rows):
    path = tmp_path / "P.csv"
    path.write_text("==PROF== Connected\nfamily ...\n" + "\n".join([HEAD] + rows) + "\n")
    return str(path)


def test_medians_by_kernel_in_microseconds(tmp_path):
    path = write(tmp_path, [
        row(0, "void kdtree::verify_paged_sm90a_pingpong_kernel<bf16, 0, 1>(PagedArgs)", "214,848"),
        row(1, "void kdtree::verify_split_merge_kernel<8, bf16>(PagedArgs)", "7,376"),
        row(2, "void kdtree::verify_paged_sm90a_pingpong_kernel<bf16, 0, 1>(PagedArgs)", "213,888"),
        row(3, "void kdtree::verify_paged_sm90a_pingpong_kernel<bf16, 0, 1>(PagedArgs)", "212,000"),
        row(4, "void smxx::decode::get_mla_metadata_kernel(Params)", "4,896"),
        row(5, "void flash_fwd_splitkv_mla_kernel<T, P>(Params, Tma)", "0.2091", unit="ms"),
        row(6, "void smxx::decode::flash_fwd_mla_combine_kernel<bf16, 512, 64, 8, 256>(Params)", "8.864",
            unit="us"),
        row(7, "void at::fill_kernel(...)", "999,999"),
        row(8, "void kdtree::verify_split_merge_kernel<8, bf16>(PagedArgs)", "1", metric="sm__cycles"),
    ])
    medians = ncu_durations.durations_us(path)
    assert medians[("ours", "split kernel")] == pytest.approx(213.888)
    assert medians[("ours", "merge")] == pytest.approx(7.376)
    assert medians[("flashmla", "main")] == pytest.approx(209.1)
    assert medians[("flashmla", "combine")] == pytest.approx(8.864)
    assert medians[("flashmla", "metadata")] == pytest.approx(4.896)
    assert len(medians) == 5  # the fill kernel and the other metric left out
    assert ncu_durations.per_call_us(medians, "ours") == pytest.approx(213.888 + 7.376)
    assert ncu_durations.per_call_us(medians, "flashmla") == pytest.approx(209.1 + 8.864)


def test_a_call_without_a_merge_is_its_split_kernel():
    medians = {("ours", "split kernel"): 100.0}
    assert ncu_durations.per_call_us(medians, "ours") == 100.0


def sweep_line(prefix, ours_tiles, peer_tiles):
    """tile_sweep.py --peer flashmla's line for one prefix, as it prints it."""
    return (f"  prefix {prefix:7d}: {ours_tiles:4d} tiles per block, 18.3708 ms; flashmla: "
            f"{peer_tiles:.3f} tiles per CTA (8 parts), 19.3921 ms")


def test_tiles_from_the_sweeps_line(tmp_path):
    path = tmp_path / "P.csv"
    path.write_text("==PROF== Connected\n" + sweep_line(49152, 97, 96.125) + "\n" + HEAD + "\n")
    assert ncu_durations.tiles_of(str(path)) == (97.0, 96.125)
    (tmp_path / "none.csv").write_text(HEAD + "\n")
    with pytest.raises(ValueError):
        ncu_durations.tiles_of(str(tmp_path / "none.csv"))


def test_main_fits_both_lines(tmp_path, capsys):
    paths = []
    for i, (x, ours, peer) in enumerate([(100, 230.0, 220.0), (200, 430.0, 410.0), (300, 630.0, 600.0)]):
        path = tmp_path / f"P{i}.csv"
        path.write_text("\n".join([sweep_line(1000 * x, x, x), HEAD,
                                   row(0, "verify_paged_sm90a_pingpong_kernel", f"{ours * 1000:.0f}"),
                                   row(1, "flash_fwd_splitkv_mla_kernel", f"{peer * 1000:.0f}")]) + "\n")
        paths.append(str(path))
    assert ncu_durations.main(paths) == 0
    out = capsys.readouterr().out
    assert "ours per call: 30.0 us fixed + 2.000 us per tile" in out
    assert "flashmla per call: 30.0 us fixed + 1.900 us per tile" in out


def test_plain_prints_each_files_medians_and_call(tmp_path, capsys):
    path = write(tmp_path, [
        row(0, "void kdtree::verify_paged_sm90a_kernel<bf16, 1>(PagedArgs)", "34,560"),
        row(1, "void kdtree::verify_split_merge_kernel<1, bf16>(PagedArgs)", "7,808"),
        row(2, "void kdtree::verify_paged_sm90a_kernel<bf16, 1>(PagedArgs)", "34,016"),
        row(3, "void kdtree::verify_split_merge_kernel<1, bf16>(PagedArgs)", "7,968"),
        row(4, "void kdtree::verify_paged_sm90a_kernel<bf16, 1>(PagedArgs)", "35,040"),
        row(5, "void kdtree::verify_split_merge_kernel<1, bf16>(PagedArgs)", "8,064"),
    ])
    assert ncu_durations.main(["--plain", path]) == 0
    assert capsys.readouterr().out.strip() == "P.csv: merge 7.97, split kernel 34.56; per call 42.53 us"
