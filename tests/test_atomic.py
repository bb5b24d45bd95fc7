"""harness.atomic: a file is replaced whole or not at all, by every writer that shares it."""
import json
import os
import stat

import pytest

from harness import atomic
from tests.support.fsyncs import record_fsyncs


def names(folder):
    return sorted(os.listdir(folder))


def test_a_write_replaces_the_file_whole_and_leaves_nothing_beside_it(tmp_path):
    path = tmp_path / "out.json"
    path.write_text("old", encoding="utf-8")
    atomic.write_json(path, {"b": 1, "a": [2, "é"]}, sort_keys=True)
    text = path.read_text(encoding="utf-8")
    assert text == '{"a": [2, "\\u00e9"], "b": 1}\n' and json.loads(text) == {"a": [2, "é"], "b": 1}
    atomic.write_bytes(tmp_path / "blob", b"\x00\xff")
    assert (tmp_path / "blob").read_bytes() == b"\x00\xff"
    assert names(tmp_path) == ["blob", "out.json"]


@pytest.mark.parametrize("failure", [RuntimeError("disk said no"), KeyboardInterrupt()])
def test_a_write_that_fails_or_is_interrupted_keeps_the_old_content(tmp_path, failure):
    path = tmp_path / "report.html"
    path.write_text("the old report", encoding="utf-8")
    with pytest.raises(type(failure)):
        with atomic.replacing(path) as fh:
            fh.write("half of the new")
            raise failure
    assert path.read_text(encoding="utf-8") == "the old report"
    assert names(tmp_path) == ["report.html"]


def test_the_file_gets_the_mode_open_would_give_not_a_private_one(tmp_path):
    old = os.umask(0o022)
    try:
        atomic.write_text(tmp_path / "weights.pt", "x")
    finally:
        os.umask(old)
    # readable by another user, as a container's user must read a weights file written by root
    assert stat.S_IMODE(os.stat(tmp_path / "weights.pt").st_mode) == 0o644


def test_two_writers_of_one_path_never_share_a_temporary_file(tmp_path):
    path = tmp_path / "state.json"
    with atomic.replacing(path) as first:
        first.write("first")
        with atomic.replacing(path) as second:
            second.write("second")
            assert len(names(tmp_path)) == 2  # two temporary files, neither under the final name
        assert path.read_text(encoding="utf-8") == "second"
    assert path.read_text(encoding="utf-8") == "first"  # the last rename wins, whole
    assert names(tmp_path) == ["state.json"]


def test_a_missing_folder_is_an_error_and_creates_nothing(tmp_path):
    with pytest.raises(FileNotFoundError):
        atomic.write_text(tmp_path / "no" / "such.json", "{}")
    assert names(tmp_path) == []


def test_only_whole_file_modes_are_offered(tmp_path):
    with pytest.raises(ValueError, match="mode"):
        with atomic.replacing(tmp_path / "f", "a"):
            pass
    assert names(tmp_path) == []


def test_the_folder_is_fsynced_after_the_rename_so_the_new_entry_survives_a_crash(tmp_path, monkeypatch):
    path = tmp_path / "trial.json"
    path.write_text("old", encoding="utf-8")
    seen = record_fsyncs(monkeypatch, path)
    atomic.write_text(path, "new")
    assert seen == [("file", "old"), ("folder", "new")]
