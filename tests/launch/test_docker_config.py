"""The docker backend's configuration, without an engine: scenario options, image choice, pins."""
import pytest

from harness.launch import image_lock, image_wheels, images
from harness import launch
from harness.plan import scenario
from harness.errors import UserError
from harness.launch import docker

BASE = """\
name: d
backend: docker
matrix: {framework: [calibrate, detbench-trainer], model: [retinanet]}
"""


def load(tmp_path, extra=""):
    path = tmp_path / "s.yaml"
    path.write_text(BASE + extra)
    return launch.load_scenario(path)


@pytest.mark.parametrize("section, field, words", [
    ("docker: {gpus: -1}", "docker.gpus", "'all' or a count"),
    ("docker: {gpus: some}", "docker.gpus", "'all' or a count"),
    ("docker: {memory: lots}", "docker.memory", "pattern"),
    ("docker: {shm_size: 8 g}", "docker.shm_size", "pattern"),
    ("docker: {network: wide}", "docker.network", "'none', 'bridge' or 'host'"),
    ("docker: {privileged: true}", "docker.privileged", "unknown key"),
    ("docker: {images: {detbench-trainer: nope}}", "docker.images.detbench-trainer", "unknown image recipe 'nope'"),
    ("docker: {images: {yolo: detbench-trainer}}", "docker.images.yolo", "unknown framework 'yolo'"),
])
def test_bad_docker_options_name_file_line_and_field(tmp_path, section, field, words):
    with pytest.raises(UserError) as err:
        load(tmp_path, section + "\n")
    message = str(err.value)
    assert message.startswith("%s:4: %s: " % (tmp_path / "s.yaml", field)), message
    assert words in message and "\n" not in message


def test_each_framework_runs_in_its_own_recipe_unless_the_scenario_says_otherwise(tmp_path):
    sc = load(tmp_path)
    assert docker.recipe_for(sc, "detbench-trainer") == "detbench-trainer"
    assert docker.recipe_for(sc, "calibrate") == "calibrate"
    sc = load(tmp_path, "docker: {images: {calibrate: detbench-trainer}}\n")
    assert docker.recipe_for(sc, "calibrate") == "detbench-trainer"
    assert docker.python_for(sc, "calibrate") == "/opt/env/bin/python"


def test_a_trial_command_uses_the_images_interpreter(tmp_path):
    from harness import run
    sc = load(tmp_path)
    trials = run.schedule(sc, scenario.plan(sc), backend="docker")
    assert {t.argv[0] for t in trials} == {images.RECIPES["detbench-trainer"].python}


def test_every_framework_has_a_recipe():
    from harness import frameworks
    assert all(images.default_recipe(name) in images.RECIPES for name in frameworks.FRAMEWORKS)
    assert images.default_recipe("yolo") is None


def test_each_recipe_is_declared_by_one_framework_only():
    from harness import frameworks
    declared = [r.name for fw in frameworks.FRAMEWORKS.values() for r in fw.images]
    assert sorted(declared) == sorted(images.RECIPES)


def test_requirements_with_a_floating_line_are_refused_before_any_download(tmp_path):
    req = tmp_path / "requirements.txt"
    req.write_text("torch==2.14.1\nnumpy>=2\n")
    with pytest.raises(UserError, match="every line must pin name==version"):
        image_wheels.fetch_wheels(req, "3.11", out=None)


def test_a_wheel_to_build_here_must_be_pinned_and_is_named_before_any_download(tmp_path, monkeypatch):
    monkeypatch.setenv("DETBENCH_CACHE", str(tmp_path / "cache"))
    req = tmp_path / "requirements.txt"
    req.write_text("omegaconf==2.3.0\n")
    with pytest.raises(UserError, match="no pin for antlr4-python3-runtime, which the recipe builds here"):
        image_wheels.fetch_wheels(req, "3.11", out=None, build_here=("antlr4_python3_runtime",))
    assert not (tmp_path / "cache").exists()


def test_the_effdet_image_builds_its_only_sdist_on_the_host():
    spec = images.recipe("effdet")
    assert spec.base_recipe == "torchvision" and spec.build_here == ("antlr4-python3-runtime",)
    assert images.recipe("torchvision").base_recipe == "detbench-trainer"
    assert images.recipe("detbench-trainer").local_base
    pins = (image_lock.RECIPES_DIR / "effdet" / "requirements.txt").read_text()
    assert "\nantlr4-python3-runtime==4.9.3\n" in pins
    assert images.default_recipe("effdet") == "effdet" and "effdet-upstream" in images.RECIPES


def test_a_dry_run_names_the_images_built_here(tmp_path, monkeypatch, capsys):
    lock = tmp_path / "built.json"
    monkeypatch.setenv("DETBENCH_IMAGES_BUILT", str(lock))
    image_lock.record("calibrate", {"image": "detbench/calibrate:abc", "id": "sha256:" + "1" * 64}, lock)
    import io
    out = io.StringIO()
    docker.dry_run(load(tmp_path), out)
    text = out.getvalue()
    assert "# calibrate runs in image calibrate: detbench/calibrate:abc (sha256:111" in text
    assert ("# detbench-trainer runs in image detbench-trainer: not built "
            "(detbench image build detbench-trainer)") in text


def test_a_damaged_lock_or_record_of_built_images_is_one_clear_error(tmp_path):
    (tmp_path / "images.lock").write_text("{not json")
    with pytest.raises(UserError, match="images.lock: not a valid lock file"):
        image_lock.read_lock(tmp_path)
    (tmp_path / "built.json").write_text("[]")
    with pytest.raises(UserError, match="built.json: not a valid record of built images"):
        image_lock.read_built(tmp_path / "built.json")
