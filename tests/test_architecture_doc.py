"""docs/architecture.md's "How to add" names only files that are there: every path exists (a new
file's `<name>` path: its folder), and every name it says is in a file is in it."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
KINDS = ("A rival framework", "A log format", "A report section", "A platform", "A launcher")


def how_to_add(text):
    """The text of the "How to add" section, up to the next section of its level."""
    start = text.index("\n## How to add\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else len(text)]


def named_paths(section):
    """Every code span that names a path: a slash in it, or a file of the repository's root."""
    spans = re.findall(r"`([^`\s]+)`", section)
    return sorted({s for s in spans if "/" in s or re.fullmatch(r"[\w.-]+\.(py|md|yaml|json|sh)", s)})


def test_every_kind_of_addition_has_its_list():
    section = how_to_add(DOC.read_text(encoding="utf-8"))
    assert re.findall(r"^### (.+)$", section, re.M) == list(KINDS)


def missing(paths):
    """The paths that are not in the repository; for a new file's `<name>` path, its folder."""
    out = []
    for path in paths:
        if "<" in path:
            if not (ROOT / path[:path.index("<")].rpartition("/")[0]).is_dir():
                out.append(path)
        elif not (ROOT / path).exists():
            out.append(path)
    return out


def test_every_path_named_exists_and_a_new_file_s_folder_does():
    paths = named_paths(how_to_add(DOC.read_text(encoding="utf-8")))
    assert "harness/frameworks/__init__.py" in paths and "harness/frameworks/<name>.py" in paths
    assert not missing(paths), "docs/architecture.md, How to add, names what is not there: %s" % missing(paths)


def names_in_files(section):
    """(name, path) for each "`NAME` in `PATH`" ("of", "interface of"), "an `NAME` of `PATH`" and
    "`NAME` record (`PATH`)" the section says."""
    found = re.findall(r"`(\w+)`(?:\s+interface)?\s+(?:in|of)\s+`([^`<]+\.py)`", section)
    return found + re.findall(r"`(\w+)`(?:\s+record)?\s+\(`([^`<]+\.py)`\)", section)


def defines(path, name):
    text = (ROOT / path).read_text(encoding="utf-8")
    return re.search(r"^(class {0}\b|def {0}\(|{0}\s*[:=])".format(name), text, re.M) is not None


def test_every_name_said_to_be_in_a_file_is_defined_there():
    said = names_in_files(how_to_add(DOC.read_text(encoding="utf-8")))
    for pair in [("FRAMEWORKS", "harness/frameworks/__init__.py"), ("Framework", "harness/frameworks/base.py"),
                 ("CASES", "tests/scrapers/test_scraper_formats.py"), ("Strict", "harness/plan/strict.py"),
                 ("IterationRecord", "harness/measure/records.py")]:
        assert pair in said
    absent = [(name, path) for name, path in said if not defines(path, name)]
    assert not absent, "docs/architecture.md, How to add: not defined where it says: %s" % absent


def test_the_check_catches_a_name_moved_away_and_a_path_gone():
    section = "`LAUNCHERS` in `harness/launch/base.py`; `RECIPES` of `harness/frameworks/accuracy.py`"
    assert [defines(p, n) for n, p in names_in_files(section)] == [False, True]
    paths = named_paths("`harness/frameworks/gone.py`, `harness/gone/<name>.py`, `harness/<name>.py` and `runner.py`")
    assert missing(paths) == ["harness/frameworks/gone.py", "harness/gone/<name>.py"]
