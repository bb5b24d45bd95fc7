"""The harness benchmarks run end to end in their tiny modes (figures are not judged here)."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def bench(*args):
    return subprocess.run([sys.executable] + list(args), cwd=str(ROOT), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=300)


def test_scale_benchmark_builds_a_store_and_times_the_commands():
    proc = bench("-m", "benchmarks.scale", "--quick")
    assert "store of 4 runs, 400 trials" in proc.stdout, proc.stdout
    for command in ("report", "compare", "dry-run"):
        assert "\n" + command in proc.stdout, proc.stdout


def test_scrape_speed_benchmark_counts_every_record():
    proc = bench("benchmarks/scrape_speed.py", "--mb", "0.2", "--formats", "mmdet-v2", "detectron2")
    rows = [l.split() for l in proc.stdout.splitlines() if l.startswith(("mmdet-v2", "detectron2"))]
    assert len(rows) == 2, proc.stdout
    for _name, lines, records, errors, *_ in rows:
        assert int(errors) == 0 and int(records) == int(lines) - int(lines) // 20, proc.stdout
