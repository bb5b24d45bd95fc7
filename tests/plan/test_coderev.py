"""The detbench code a run records: version, the commit of its own git checkout, and whether
tracked files had changes not committed (files git does not track do not count)."""
import subprocess

import pytest

from harness import __version__
from harness.plan import coderev


def git(root, *args):
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def checkout(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    (root / "code.py").write_text("x = 1\n")
    git(root, "add", "code.py")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    return root


def test_a_clean_checkout_gives_its_commit(checkout):
    rev = coderev.revision(str(checkout))
    assert rev == {"version": __version__, "commit": git(checkout, "rev-parse", "HEAD").strip(), "dirty": False}
    assert coderev.describe(rev) == "detbench %s at %s" % (__version__, rev["commit"][:12])


def test_an_edited_tracked_file_makes_it_dirty_and_an_untracked_one_does_not(checkout):
    (checkout / "results.sqlite").write_text("measured\n")
    assert coderev.revision(str(checkout))["dirty"] is False
    (checkout / "code.py").write_text("x = 2\n")
    rev = coderev.revision(str(checkout))
    assert rev["dirty"] is True and coderev.describe(rev).endswith(" with uncommitted changes")


def test_a_folder_inside_someone_else_s_repository_does_not_take_its_commit(checkout):
    (checkout / "site-packages").mkdir()
    assert coderev.revision(str(checkout / "site-packages")) == {"version": __version__, "commit": None, "dirty": None}
    assert coderev.describe(coderev.revision(str(checkout / "site-packages"))) == "detbench %s" % __version__
    assert coderev.describe(None) == "unrecorded detbench code"


def test_every_run_s_host_record_carries_the_code_that_ran_it():
    from harness.plan import platforms

    assert platforms.host_record([])["code"] == coderev.revision()


def test_revisions_are_named_only_where_two_recorded_ones_differ():
    a = {"version": "0.1.0", "commit": "a" * 40, "dirty": False}
    b = {"version": "0.1.0", "commit": "b" * 40, "dirty": False}
    a_edited = dict(a, dirty=True)
    assert coderev.named_where_differing({"x": a, "y": dict(a)}) == {}
    assert coderev.named_where_differing({"x": a, "y": None}) == {}
    assert coderev.named_where_differing({"x": a, "y": b, "z": None}) == {
        "x": "detbench 0.1.0 at aaaaaaaaaaaa",
        "y": "detbench 0.1.0 at bbbbbbbbbbbb",
    }
    said = coderev.named_where_differing({1: a, 2: a_edited, 3: a})
    assert said[2] == "detbench 0.1.0 at aaaaaaaaaaaa with uncommitted changes"
    assert said[1] == said[3] == "detbench 0.1.0 at aaaaaaaaaaaa"
