"""Pinned per-framework venvs: keyed by their pins, complete only when marked, required by runs."""
import subprocess

import pytest
from click.testing import CliRunner

from harness.launch import envs
from harness.cli import main
from harness.errors import UserError
from harness.frameworks import FRAMEWORKS

TINY = envs.EnvSpec(framework="tiny", pins={"six": "1.17.0"})


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DETBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_env_folder_changes_with_any_pin(cache):
    other = envs.EnvSpec(framework="tiny", pins={"six": "1.16.0"})
    assert envs.env_dir(TINY) != envs.env_dir(other)
    assert envs.env_dir(TINY) == envs.env_dir(envs.EnvSpec(framework="tiny", pins={"six": "1.17.0"}))
    assert envs.env_dir(TINY).parent == cache / "envs"
    mm = FRAMEWORKS["mmdetection"].env
    assert envs.wheel_key(mm.source_builds[0]).startswith("mmcv-2.1.0-")


def test_a_missing_env_is_a_user_error_naming_the_build_command(cache):
    with pytest.raises(UserError, match="run `detbench env build tiny` first"):
        envs.python_for(TINY)
    assert envs.python_for(TINY, require=False).endswith("/bin/python")


def test_run_refuses_to_start_without_the_env(cache, tmp_path):
    sc = tmp_path / "s.yaml"
    sc.write_text("name: s\nmatrix:\n  framework: [torchvision]\n  model: [retinanet]\n"
                  "input_size: [64, 64]\nwarmup: 1\nmeasure: 1\nrepeats: 1\n")
    r = CliRunner().invoke(main, ["run", "--scenario", str(sc), "--results", str(tmp_path / "r")])
    assert r.exit_code == 2 and "detbench env build torchvision" in r.output


def test_cxx_standard_flags_are_raised(tmp_path):
    setup = tmp_path / "setup.py"
    setup.write_text("a = ['-std=c++14']\nb = ['-Wall', '-std=c++17']\nc = '-std=c++14'\n")
    assert envs._raise_cxx_std(setup, "c++20") == 3
    assert "c++14" not in setup.read_text() and setup.read_text().count("-std=c++20") == 3


@pytest.mark.slow
def test_build_makes_an_isolated_env_and_reuses_it(cache):
    log = open(cache.parent / "build.log", "w") if cache.parent.exists() else None
    path = envs.build(TINY, log=log)
    assert envs.is_built(TINY) and (path / envs.MARKER).is_file()
    py = envs.python_for(TINY)
    out = subprocess.run([py, "-c", "import six, sys; print(six.__version__, sys.prefix)"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "1.17.0" and out[1] == str(path)
    # no system site-packages: click (installed for detbench itself) is not importable there
    assert subprocess.run([py, "-c", "import click"], capture_output=True).returncode != 0
    before = (path / envs.MARKER).stat().st_mtime_ns
    envs.build(TINY, log=log)
    assert (path / envs.MARKER).stat().st_mtime_ns == before
