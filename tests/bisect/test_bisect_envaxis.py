"""`detbench bisect --env-axis`: the same search over environments built from pins, here of a tiny
package whose versions pip installs from a local folder of wheels (no network)."""
import io
import os

import pytest

from harness.bisect import envaxis, search
from harness.errors import UserError
from tests.support import bisectrepo
from tests.support.cliproc import detbench, error_lines, finish

PACE_FROM_PACKAGE = "try:\n    from pacepkg import PACE\nexcept ImportError:\n    PACE = 1.0\n"
SCENARIO = bisectrepo.scenario_text(iteration_ms=10.0, warmup=1, measure=10)


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """Wheels of pacepkg: 1.0 and 1.1 keep the workload's pace, 2.0 makes it 10% slower; and
    one env cache for the module's tests."""
    root = tmp_path_factory.mktemp("envaxis")
    for version, pace in (("1.0", 1.0), ("1.1", 1.0), ("2.0", 1.1)):
        bisectrepo.make_wheel(root / "wheels", "pacepkg", version, {"pacepkg/__init__.py": "PACE = %r\n" % pace})
    repo = root / "repo"
    bisectrepo.make_repo(repo, commits=1, scenario=SCENARIO, pace_line=PACE_FROM_PACKAGE)
    return root


@pytest.fixture
def offline(index, monkeypatch):
    env = {"DETBENCH_CACHE": str(index / "cache"), "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(index / "wheels"),
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return dict(os.environ)


def test_parses_an_axis_and_refuses_a_malformed_one():
    assert envaxis.parse_axis("torch=2.12.0,2.13.0,2.14.1") == ("torch", ["2.12.0", "2.13.0", "2.14.1"])
    for text, why in (("torch", "give PACKAGE=V1,V2"), ("torch=2.12.0", "at least two versions"),
                      ("torch=2.1,2.1", "listed twice"), ("torch=2.1,;rm", "is not a version")):
        with pytest.raises(UserError, match=why):
            envaxis.parse_axis(text)


@pytest.mark.slow
def test_names_the_version_that_made_the_workload_slower(index, offline, tmp_path):
    out = io.StringIO()
    opts = search.Options(scenario=bisectrepo.SCENARIO, env_axis="pacepkg=1.0,1.1,2.0", repo=str(index / "repo"),
                          results_dir=str(tmp_path / "results"), seed=3)
    outcome = search.bisect(opts, out)
    assert outcome.culprit.label == "pacepkg==2.0", out.getvalue()
    assert [(s.arm.label, s.verdict) for s in outcome.steps][:3] == [
        ("pacepkg==2.0", "regression"), ("pacepkg==1.1", "good"),
        ("pacepkg==2.0", "regression vs parent pacepkg==1.1")]
    assert outcome.found[0].parent.label == "pacepkg==1.1"
    assert "first bad environment: pacepkg==2.0" in out.getvalue()
    assert 0.86 < outcome.effect.ratio < 0.96
    built = sorted(p.name for p in (index / "cache" / "envs").iterdir())
    assert len(built) == 3 and all(name.startswith("bisect-pacepkg-") for name in built)


def test_pins_that_cannot_be_installed_are_one_line_exit_2_and_leave_nothing(index, offline, tmp_path):
    results = tmp_path / "results"
    before = sorted((index / "cache" / "envs").iterdir()) if (index / "cache" / "envs").exists() else []
    code, out = finish(detbench("bisect", "--scenario", bisectrepo.SCENARIO, "--repo", index / "repo",
                                "--env-axis", "pacepkg=1.0,9.9", "--results", results, env=offline), timeout=180)
    assert code == 2, out
    assert len(error_lines(out)) == 1 and out.strip() == error_lines(out)[0], out
    assert "--env-axis pacepkg==9.9: the environment could not be built" in out and "pacepkg==9.9" in out
    after = sorted((index / "cache" / "envs").iterdir())
    assert [p for p in after if p not in before and "building" in p.name] == []
    assert len([p for p in after if p not in before]) <= 1      # at most 1.0's env, which did build
    assert not results.exists()


def test_a_commit_with_detbenchs_own_pins_or_none_runs_in_this_environment(tmp_path):
    import sys
    assert envaxis.revision_python(tmp_path, "abc") == sys.executable          # no pyproject.toml
    (tmp_path / "pyproject.toml").write_bytes((envaxis.ROOT / "pyproject.toml").read_bytes())
    assert envaxis.revision_python(tmp_path, "abc") == sys.executable          # the same pins


def test_a_commit_with_other_pins_and_no_way_to_build_them_is_refused(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'old'\ndependencies = ['torch==1.0']\n")
    with pytest.raises(UserError, match="revision abc pins other packages than this detbench and has no "
                                        "scripts/env.sh"):
        envaxis.revision_python(tmp_path, "abc")
