"""The lint and type checks CI runs: .ci/run runs .ci/lint.sh before the tests, pre-commit runs the
same tools at the same versions, and every module mypy checks is checked strictly."""
import configparser
import re
from pathlib import Path

from harness.plan import yamlfile

ROOT = Path(__file__).resolve().parent.parent
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==(\S+)$")


def lint_pins():
    pins = {}
    for line in (ROOT / ".ci" / "requirements-lint.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            m = PIN.match(line)
            assert m, ".ci/requirements-lint.txt: %r is not an exact pin (name==version)" % line
            pins[m.group(1).lower()] = m.group(2)
    return pins


def test_ci_lints_before_it_provisions_or_tests():
    commands = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
                if line.strip() and not line.strip().startswith("#")]
    lint = next(i for i, c in enumerate(commands) if ".ci/lint.sh" in c and "stamp" not in c)
    assert "if ! bash .ci/lint.sh" in commands[lint], "a lint failure must stop CI"
    assert commands[lint + 2] == "exit 1"
    first_provision = next(i for i, c in enumerate(commands) if "provision-" in c)
    tests = next(i for i, c in enumerate(commands) if "scripts/test.sh" in c)
    assert lint < first_provision < tests


def test_pre_commit_installs_exactly_the_pinned_tools():
    config, _ = yamlfile.load(ROOT / ".pre-commit-config.yaml")
    hooks = [hook for repo in config["repos"] for hook in repo["hooks"]]
    assert {hook["id"] for hook in hooks} == {"ruff", "ruff-format", "mypy"}
    installed = {}
    for hook in hooks:
        assert hook["language"] == "python"
        for dep in hook["additional_dependencies"]:
            m = PIN.match(dep)
            assert m, "%s: %r is not an exact pin" % (hook["id"], dep)
            installed[m.group(1).lower()] = m.group(2)
    assert installed == lint_pins()


def test_every_module_mypy_checks_is_held_to_the_strict_settings():
    ini = configparser.ConfigParser()
    ini.read(ROOT / "mypy.ini")
    strict = [pattern.strip() for section in ini.sections() if section.startswith("mypy-")
              for pattern in section[len("mypy-"):].split(",")
              if ini.getboolean(section, "disallow_untyped_defs", fallback=False)]
    modules = []
    for entry in ini["mypy"]["files"].split(","):
        path = ROOT / entry.strip()
        assert path.exists(), "mypy.ini checks %s, which is not there" % entry.strip()
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        modules += [".".join(f.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__") for f in files]
    loose = [m for m in modules
             if not any(m == p or (p.endswith(".*") and m.startswith(p[:-1])) or m + ".*" == p for p in strict)]
    assert modules and not loose, "checked but not strictly: %s" % loose


def test_pre_commit_checks_the_format_of_the_folders_ci_does():
    config, _ = yamlfile.load(ROOT / ".pre-commit-config.yaml")
    hook = next(h for repo in config["repos"] for h in repo["hooks"] if h["id"] == "ruff-format")
    lint = (ROOT / ".ci" / "lint.sh").read_text()
    folders = re.search(r"^FORMATTED=\((.*)\)$", lint, re.M).group(1).split()
    assert sorted(folders) == sorted("harness/%s" % f for f in
                                     re.search(r"\^harness/\((.*)\)/", hook["files"]).group(1).split("|"))
