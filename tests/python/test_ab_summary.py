"""scripts/ab_summary.py (the A/B summary of scripts/ab_bench.sh) on small ab.txt files:
each version's mean and its change at each position against the baseline, failed checks,
unknown baselines. Standard library only; needs no GPU and no library."""

import contextlib
import importlib.util
import io
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("ab_summary", ROOT / "scripts" / "ab_summary.py")
ab_summary = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ab_summary)

# Two versions, two rounds: `main` first in round 1, `new` first in round 2.
TWO_ROUNDS = """\
round 1: ours = main (5493f1f)
[S3] floor 0.2252 ms (compute); ours 0.2800 ms eff 0.804 err 1.75e-03 ok; new 0.3000 ms eff 0.751 err 1.75e-03 ok;  (0.8 s)
[S5] floor 0.4504 ms (compute); ours 0.5000 ms eff 0.901 err 1.81e-03 ok; new 0.5100 ms eff 0.883 err 1.81e-03 ok;  (0.5 s)
round 2: ours = new (6ddb90d)
[S3] floor 0.2252 ms (compute); ours 0.2940 ms eff 0.766 err 1.75e-03 ok; main 0.2900 ms eff 0.777 err 1.75e-03 ok;  (0.6 s)
[S5] floor 0.4504 ms (compute); ours 0.4900 ms eff 0.919 err 1.81e-03 ok; main 0.5200 ms eff 0.866 err 1.81e-03 ok;  (0.5 s)
"""


def run(text, tmp_path, *args):
    path = tmp_path / "ab.txt"
    path.write_text(text)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = ab_summary.main([str(path), *args])
    return rc, out.getvalue()


def test_parse_positions_and_order():
    times, order, failures = ab_summary.parse(io.StringIO(TWO_ROUNDS))
    assert order == ["main", "new"]
    assert failures == []
    assert times["S3"]["main"] == [(0, 0.28), (1, 0.29)]
    assert times["S3"]["new"] == [(1, 0.30), (0, 0.294)]


def test_means_and_changes_by_position(tmp_path):
    rc, out = run(TWO_ROUNDS, tmp_path)
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["S3", "main", "0.2850"]
    # new: mean 0.2970 = +4.2% against 0.2850; first 0.2940 against main first 0.2800
    # (+5.0%), second 0.3000 against main second 0.2900 (+3.4%)
    assert lines[1].split() == ["S3", "new", "0.2970", "ms", "+4.2%", "by", "position", "1:+5.0%", "2:+3.4%"]
    assert lines[3].split() == ["S5", "new", "0.5000", "ms", "-2.0%", "by", "position", "1:-2.0%", "2:-1.9%"]


def test_other_base(tmp_path):
    rc, out = run(TWO_ROUNDS, tmp_path, "--base", "new")
    assert rc == 0
    assert out.splitlines()[0].split()[:2] == ["S3", "new"]  # the base first
    assert "-4.0%" in out.splitlines()[1]  # main's mean 0.2850 against new's 0.2970


def test_failed_check_is_reported(tmp_path):
    rc, out = run(TWO_ROUNDS.replace("new 0.5100 ms eff 0.883 err 1.81e-03 ok", "new 0.5100 ms eff 0.883 err 9e-01 FAIL"),
                  tmp_path)
    assert rc == 1
    assert "FAILED CHECK: [S5]" in out


def test_unknown_base_and_empty_file(tmp_path, capsys):
    rc, _ = run(TWO_ROUNDS, tmp_path, "--base", "nope")
    assert rc == 2
    assert "no version 'nope'" in capsys.readouterr().err
    rc, _ = run("round 1: ours = main (x)\n  no result (bench.py failed)\n", tmp_path)
    assert rc == 1
