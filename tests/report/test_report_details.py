"""`detbench report` in the terminal leads with each table, its flags and a verdict per row; the
scope, implementation, work and place-check lines wait for --details, and a file written with
--out keeps every line."""
from click.testing import CliRunner

from harness.cli import main
from tests.support.reportstore import store_run

FIGURES = {"calibrate/retinanet/fp32/P2/1/1": [40.2, 40.0, 39.9],     # images/s of each repeat
           "detbench-trainer/retinanet/fp32/P2/1/1": [0.812, 0.807, 0.803]}
SCOPE = "Measured: 1 device, 2 images per device (batch 2); median of 3 repeats."


def stored(root):
    """One run on P2: two frameworks' RetinaNet cells, three rounds of one repeat each."""
    store_run(root, FIGURES, {"name": "two", "warmup": 2, "measure": 6, "repeats": 3})
    return root


def report(*args):
    out = CliRunner().invoke(main, ["report", "--platform", "P2", *args])
    assert out.exit_code == 0, out.output
    return out.output


def test_the_terminal_leads_with_the_table_and_a_verdict_and_keeps_the_scope_for_details(tmp_path):
    results = str(stored(tmp_path))
    brief = report("--results", results)
    assert "|RetinaNet|40.0(50.0ms)|0.807(2478ms)|" in brief      # "%.1f" showed the trainer's 0.8
    assert "Verdict, RetinaNet: calibrate 40.0 images/s; 49.6x detbench-trainer (PyTorch)." in brief
    assert SCOPE not in brief
    assert brief.endswith("Scope, implementation, work and place check under each table: detbench report --details.\n")
    detailed = report("--results", results, "--details")
    assert SCOPE in detailed and "Verdict, RetinaNet:" in detailed and "--details." not in detailed


def test_files_written_with_out_keep_every_line(tmp_path):
    results = str(stored(tmp_path / "results"))
    for fmt in ("md", "html"):
        target = tmp_path / ("report." + fmt)
        report("--results", results, "--format", fmt, "--out", str(target))
        text = target.read_text(encoding="utf-8")
        assert SCOPE in text and "--details" not in text, fmt
