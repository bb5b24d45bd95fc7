"""torchvision's recipe scripts, references/detection of the pinned release's tag: an archive the user
names is checked like detectron2's (readable, of the pinned release, every script there) and its scripts
are kept byte for byte; where none is given the torchvision row runs detbench's replica.

No archive of pytorch/vision is made here: the refusals are shown on archives that hold no script at
all, and the byte-identity is shown only on a real archive of the tag named by DETBENCH_TORCHVISION_SOURCE
(skipped, with that reason, where none is named: the replica is then what runs)."""
import hashlib
import io
import os
import tarfile

import pytest

from harness.drivers import torchvision_reference as reference
from harness.errors import UserError
from harness.frameworks import FRAMEWORKS
from harness.launch import envs


def archive(path, members, prefix="vision-0.29.1/"):
    with tarfile.open(path, "w:gz") as tar:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(prefix + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return str(path)


def keep(tmp_path, monkeypatch, given):
    monkeypatch.setenv("DETBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(reference.SOURCE_ENV, given)
    return envs.keep_references(FRAMEWORKS["torchvision"].env, io.StringIO())


def test_the_pinned_tag_is_torchvisions_pinned_release():
    assert reference.TAG == "v" + FRAMEWORKS["torchvision"].pins["torchvision"] == "v" + reference.VERSION
    assert reference.URL.endswith("/pytorch/vision/archive/refs/tags/%s.tar.gz" % reference.TAG)


@pytest.mark.parametrize("members, words", [
    ({"version.txt": "0.28.0\n"}, "is of torchvision 0.28.0, not the pinned 0.29.1"),
    ({"version.txt": "0.29.1\n"}, "no references/detection/train.py in the archive"),
    ({"README.md": "detectron2\n"}, "no version.txt at its top"),
])
def test_an_archive_of_another_release_or_without_the_scripts_is_refused_in_one_line(tmp_path, monkeypatch,
                                                                                     members, words):
    given = archive(tmp_path / "a.tar.gz", members)
    with pytest.raises(UserError) as err:
        keep(tmp_path, monkeypatch, given)
    text = str(err.value)
    assert text.startswith("torchvision: %s=%s" % (reference.SOURCE_ENV, given)) and words in text
    assert "\n" not in text and reference.find(str(tmp_path / "cache")) is None


def test_a_file_that_is_no_archive_is_refused(tmp_path, monkeypatch):
    bad = tmp_path / "notes.txt"
    bad.write_text("not a tarball")
    with pytest.raises(UserError, match="not a readable tar archive"):
        keep(tmp_path, monkeypatch, str(bad))


def test_without_an_archive_the_replica_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("DETBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(reference.SOURCE_ENV, raising=False)
    log = io.StringIO()
    assert envs.keep_references(FRAMEWORKS["torchvision"].env, log) is None
    assert "run detbench's replica" in log.getvalue() and reference.find(str(tmp_path / "cache")) is None


def test_the_kept_scripts_are_byte_identical_to_the_named_archive_of_the_tag(tmp_path, monkeypatch):
    given = os.environ.get(reference.SOURCE_ENV)
    if not given:
        pytest.skip("no archive of pytorch/vision %s named by %s (%s): the torchvision row runs detbench's replica"
                    % (reference.TAG, reference.SOURCE_ENV, reference.URL))
    folder = keep(tmp_path, monkeypatch, given)
    found = reference.find(str(tmp_path / "cache"))
    assert found is not None and found[0] == folder
    with tarfile.open(given) as tar:
        members = {m.name.split("/", 1)[-1] if not m.name.startswith(reference.FOLDER) else m.name: m
                   for m in tar.getmembers() if m.isfile()}
        for name in reference.FILES:
            original = tar.extractfile(members[reference.FOLDER + "/" + name]).read()
            with open(os.path.join(folder, name), "rb") as fh:
                assert fh.read() == original, name
            assert found[1]["files"][name] == hashlib.sha256(original).hexdigest()
    # a changed file is no longer the tag's: the replica runs rather than an edited script
    with open(os.path.join(folder, "engine.py"), "ab") as fh:
        fh.write(b"\n# edited\n")
    assert reference.find(str(tmp_path / "cache")) is None
