"""Installing into envs: uv from one shared cache where it is there, pip otherwise, both under pip's settings."""
import subprocess
import sys

from harness.launch import installer
from tests.support.services import need_service

PIP_CONFIG_LIST = """\
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.index-url='https://first.example/simple'
global.extra-index-url='file:///no/such/folder/simple https://mirror.example/simple'
global.find-links='/no/such/wheels'
install.index-url='https://second.example/simple'
:env:.trusted-host='mirror.example'
:env:.constraint='/etc/constraints.txt'
user.index-url='https://a-section-pip-install-never-reads.example/simple'
"""


def test_the_variables_override_the_install_section_which_overrides_global():
    settings = installer.parse_pip_config(PIP_CONFIG_LIST + ":env:.index-url='https://third.example/simple'\n")
    assert settings["index-url"] == "https://third.example/simple"
    settings = installer.parse_pip_config(PIP_CONFIG_LIST)
    assert settings["index-url"] == "https://second.example/simple"
    assert settings["cert"] == "/etc/ssl/certs/ca-certificates.crt"


def test_a_later_file_overrides_an_earlier_one_within_a_section():
    text = "global.index-url='https://site-wide.example/simple'\nglobal.index-url='https://mine.example/simple'\n"
    assert installer.parse_pip_config(text)["index-url"] == "https://mine.example/simple"


def test_uv_gets_pips_indexes_constraints_hosts_and_certificate():
    argv, env = installer.uv_options(installer.parse_pip_config(PIP_CONFIG_LIST))
    pairs = list(zip(argv[::2], argv[1::2]))
    assert ("--index-strategy", "unsafe-best-match") in pairs        # pip's choice over all indexes
    assert ("--index-url", "https://second.example/simple") in pairs
    assert ("--extra-index-url", "https://mirror.example/simple") in pairs
    assert ("--constraints", "/etc/constraints.txt") in pairs
    assert ("--allow-insecure-host", "mirror.example") in pairs
    assert env["SSL_CERT_FILE"] == "/etc/ssl/certs/ca-certificates.crt"


def test_locations_missing_from_this_disk_are_skipped_as_pip_skips_them(tmp_path):
    (tmp_path / "wheels").mkdir()
    text = "global.find-links='/no/such/wheels %s'\nglobal.extra-index-url='file:///no/such/simple'\n" % (
        tmp_path / "wheels")
    argv, _ = installer.uv_options(installer.parse_pip_config(text))
    assert "/no/such/wheels" not in argv and "file:///no/such/simple" not in argv
    assert argv[argv.index("--find-links") + 1] == str(tmp_path / "wheels")


def test_pip_installs_where_asked_for(monkeypatch, tmp_path):
    monkeypatch.setenv("DETBENCH_INSTALLER", "pip")
    command, _ = installer.install_command("/env/bin/python", ["six==1.17.0"], tmp_path)
    assert command == ["/env/bin/python", "-m", "pip", "install", "--quiet", "six==1.17.0"]


def test_uv_installs_under_pips_constraint_and_links_from_its_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("DETBENCH_INSTALLER", raising=False)
    need_service(installer.find_uv() is not None, "uv is not installed beside detbench (pip install -e .)")
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("six<=1.16.0\n")
    monkeypatch.setenv("PIP_CONSTRAINT", str(constraints))
    envs = []
    for name in ("one", "two"):
        # no pip in the env: pip's settings are read with detbench's own pip
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / name)], check=True)
        python = str(tmp_path / name / "bin" / "python")
        command, env = installer.install_command(python, ["six"], tmp_path / "cache")
        assert command[1:3] == ["pip", "install"]
        subprocess.run(command, env=env, check=True)
        envs.append(tmp_path / name)
        out = subprocess.run([python, "-c", "import six; print(six.__version__, six.__file__)"],
                             capture_output=True, text=True, check=True).stdout.split()
        assert out[0] == "1.16.0", out          # the newest six is 1.17.0: the constraint held
    files = [next((e / "lib").glob("python*/site-packages/six.py")) for e in envs]
    assert files[0].stat().st_ino == files[1].stat().st_ino   # one file on disk, linked into both
    # compiled at install, as pip does: with PYTHONDONTWRITEBYTECODE nothing would write them later
    assert all(list(f.parent.glob("__pycache__/six.*.pyc")) for f in files)
