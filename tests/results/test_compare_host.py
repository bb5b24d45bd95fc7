"""`detbench compare` across machines: a changed instruction set, and baselines made before it was recorded."""
import copy
import json
from pathlib import Path

from click.testing import CliRunner

from harness.cli import main
from harness.results import baseline, compare
from harness.plan.fingerprint import fingerprint
from tests.results.test_compare_rule import BASE, RULE, scaled
from tests.plan.test_fingerprint import AVX2_EPYC, BF16_EPYC, host_with

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "baselines" / "nightly-cpu.json"
CELLS = ("detbench-trainer/faster_rcnn/fp32/local/1/1", "detbench-trainer/retinanet/fp32/local/1/1")


def host_record(facts):
    """A run's host_json as platforms.host_record writes it (the fields compare reads)."""
    cpu = facts["cpu"]
    return {"name": "local", "cpu": {"model": cpu["model"], "sockets": cpu["sockets"], "cores": cpu["cores"],
                                     "threads": cpu["threads"]},
            "gpus": None, "memory_gb": 23.5, "os": "Debian GNU/Linux 12, kernel %s" % facts["os"]["kernel"],
            "software": {"driver": None}, "facts": facts, "fingerprint": fingerprint(facts)}


def two_cell_side(host, run_id, factor=1.0):
    cells = {key: {"settings": {"framework": "detbench-trainer", "input_size": [320, 320]}, "failed": 0,
                   "images_per_iteration": 2, "throughput": scaled(BASE, factor), "observed": scaled(BASE, factor)}
             for key in CELLS}
    return {"schema": baseline.SCHEMA, "schema_version": baseline.SCHEMA_VERSION, "run": {"id": run_id},
            "host": copy.deepcopy(host), "cells": cells}


def test_a_faster_cpu_with_bf16_is_not_reported_as_an_improvement():
    avx2, bf16 = host_record(host_with(AVX2_EPYC)), host_record(host_with(BF16_EPYC))
    result = compare.compare(two_cell_side(avx2, "night-1"), two_cell_side(bf16, "night-2", 1.88), RULE)
    assert [c.verdict for c in result.cells] == [compare.NOT_COMPARABLE] * 2
    assert result.count(compare.IMPROVEMENT) == 0
    for cell in result.cells:
        (note,) = cell.notes
        assert note.startswith("host differs: ") and "avx512_bf16: baseline no, candidate yes" in note
        assert "avx512f: baseline no, candidate yes" in note and "avx2:" not in note     # avx2: both have it
    assert result.notes == ["not comparable: the runs ran on different machines (baseline %s, candidate %s), so no "
                            "cell's speed is judged" % (avx2["fingerprint"], bf16["fingerprint"])]
    assert result.exit_code() == 0 and result.exit_code(strict=True) == 1


def test_the_same_machine_is_judged_and_a_twin_node_is_the_same_machine():
    a = host_record(host_with(AVX2_EPYC))
    twin = copy.deepcopy(a)
    twin["facts"]["hostname"], twin["facts"]["cores_available"] = "vm-2", 1
    result = compare.compare(two_cell_side(a, "night-1"), two_cell_side(twin, "night-2", 1.1), RULE)
    assert [c.verdict for c in result.cells] == [compare.IMPROVEMENT] * 2 and result.notes == []


def write(tmp_path, name, side):
    path = tmp_path / name
    baseline.save(side, path)
    return str(path)


def test_the_command_names_the_changed_extensions(tmp_path):
    avx2, bf16 = host_record(host_with(AVX2_EPYC)), host_record(host_with(BF16_EPYC))
    md = tmp_path / "summary.md"
    args = ["compare", "--baseline", write(tmp_path, "avx2.json", two_cell_side(avx2, "night-1")),
            "--candidate", write(tmp_path, "bf16.json", two_cell_side(bf16, "night-2", 1.88)),
            "--markdown", str(md)]
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 0, out.output
    assert out.output.startswith("PASS: 2 not comparable")
    assert "%s: host differs: " % CELLS[0] in out.output and "avx512_bf16: baseline no, candidate yes" in out.output
    assert "avx512_bf16: baseline no, candidate yes" in md.read_text()
    strict = CliRunner().invoke(main, args + ["--strict"])
    assert strict.exit_code == 1 and strict.output.startswith("FAIL: 2 not comparable")


# ------------------------------------------------------------------ baselines made before the instruction set

def test_the_committed_old_style_baseline_opens_and_is_not_comparable_with_a_new_run():
    old = baseline.load(COMMITTED)
    assert old["host"]["fingerprint"].startswith("fp1-")
    facts = copy.deepcopy(old["host"]["facts"])
    facts["cpu"] = dict(facts["cpu"], **{k: v for k, v in host_with(AVX2_EPYC)["cpu"].items()
                                         if k in ("vendor", "family", "model_number", "stepping", "isa")})
    cand = copy.deepcopy(old)          # the very same figures, on a machine whose every fp1 fact agrees
    cand["host"] = dict(old["host"], facts=facts, fingerprint=fingerprint(facts))
    cand["run"] = {"id": "tonight"}
    result = compare.compare(old, cand, RULE)
    assert {c.verdict for c in result.cells} == {compare.NOT_COMPARABLE}
    expected = ("host differs: the baseline's fingerprint (%s) does not record the instruction set, so it cannot "
                "show the same CPU as the candidate's (%s)" % (old["host"]["fingerprint"], cand["host"]["fingerprint"]))
    assert all(c.notes == [expected] for c in result.cells)
    assert result.notes[0].startswith("not comparable: the runs may not have run on the same kind of machine")


def test_two_old_style_records_compare_as_before_with_a_caveat():
    old = baseline.load(COMMITTED)
    again = copy.deepcopy(old)
    again["run"] = {"id": "replay"}
    result = compare.compare(old, again, RULE)
    assert {c.verdict for c in result.cells} == {compare.UNCHANGED}
    assert result.notes == ["neither run's host record lists the CPU's instruction set (%s): the same CPU model "
                            "name can hide different instruction sets; save a new baseline to have it checked"
                            % old["host"]["fingerprint"]]


def test_a_record_without_host_facts_is_not_the_same_machine_as_one_with_an_instruction_set():
    legacy = {"cpu": {"model": "AMD EPYC", "sockets": 1, "cores": 2, "threads": 2}, "gpus": None,
              "memory_gb": 23.5, "os": "Debian GNU/Linux 12, kernel 6.1.0-18-amd64", "software": {"driver": None}}
    new = host_record(host_with(AVX2_EPYC))
    (cell, _) = compare.compare(two_cell_side(legacy, "old"), two_cell_side(new, "new"), RULE).cells
    assert cell.verdict == compare.NOT_COMPARABLE
    assert cell.notes == ["host differs: the baseline's host record does not record the instruction set"]


def test_a_saved_baseline_keeps_the_instruction_set_it_was_measured_with(tmp_path):
    side = two_cell_side(host_record(host_with(BF16_EPYC)), "night-1")
    loaded = baseline.load(write(tmp_path, "b.json", side))
    assert "avx512_bf16" in loaded["host"]["facts"]["cpu"]["isa"]
    assert fingerprint(loaded["host"]["facts"]) == loaded["host"]["fingerprint"]
    assert json.loads((tmp_path / "b.json").read_text())["host"]["fingerprint"].startswith("fp2-")


def test_runs_of_different_code_on_one_machine_are_judged_and_the_note_names_both_revisions():
    a = host_record(host_with(AVX2_EPYC))
    last_night = dict(copy.deepcopy(a), code={"version": "0.1.0", "commit": "1" * 40, "dirty": False})
    tonight = dict(copy.deepcopy(a), code={"version": "0.1.0", "commit": "2" * 40, "dirty": False})
    result = compare.compare(two_cell_side(last_night, "night-1"), two_cell_side(tonight, "night-2", 0.8), RULE)
    assert [c.verdict for c in result.cells] == [compare.REGRESSION] * 2
    assert result.notes == ["code: baseline ran detbench 0.1.0 at 111111111111, candidate detbench 0.1.0 at "
                            "222222222222"]
    edited = dict(copy.deepcopy(last_night), code=dict(last_night["code"], dirty=True))
    assert compare.compare(two_cell_side(last_night, "n1"), two_cell_side(edited, "n2"), RULE).notes == [
        "code: baseline ran detbench 0.1.0 at 111111111111, candidate detbench 0.1.0 at 111111111111 with "
        "uncommitted changes"]
    # the same code, or a side that recorded none (a baseline saved before runs recorded it): no note
    assert compare.compare(two_cell_side(last_night, "n1"), two_cell_side(last_night, "n2"), RULE).notes == []
    assert compare.compare(two_cell_side(a, "n1"), two_cell_side(tonight, "n2"), RULE).notes == []
