"""The docker backend on a real Docker engine: images built and recorded, trials in containers,
containers that never outlive their run, and faults that lose nothing.

The images come from .ci/provision-docker.sh (`detbench image base`, `detbench image build
calibrate`, `detbench image build detbench-trainer`); without an engine or those images the tests
skip, or fail under DETBENCH_REQUIRE_SERVICES=1.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.launch import engine, image_lock, images
from harness.errors import UserError
from tests.support.deadlines import assert_on_deadlines, designed_ms
from tests.support.services import need_service
from tests.support.storerows import rows
from tests.support.waiting import wait_for
from tests.support.reportcells import throughput_cell

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.docker

CALIBRATE = """\
name: calibrate-docker
backend: docker
matrix:
  framework: [calibrate]
  model: [retinanet]
batch_per_gpu: 2
input_size: [320, 320]
warmup: {warmup}
measure: {measure}
repeats: {repeats}
timeout_s: 120
calibrate:
  iteration_ms: {iteration_ms}
  data_ms: 5
"""


def detbench(*args, env=None, **kw):
    return subprocess.Popen([sys.executable, "-m", "harness.cli", *args], cwd=str(ROOT),
                            env=dict(os.environ, **(env or {})), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kw)


def finish(proc, timeout=600):
    out, _ = proc.communicate(timeout=timeout)
    return proc.returncode, out


@pytest.fixture(scope="module")
def client():
    need_service(engine.available(), "no Docker engine answers at %s (run .ci/provision-docker.sh)" % engine.where())
    c = engine.connect()
    yield c
    c.close()


def need_image(client, name):
    try:
        images.resolve(client, name)
    except UserError as exc:
        need_service(False, str(exc))


def ours(client, **labels):
    filters = [engine.LABEL + "=1"] + ["%s.%s=%s" % (engine.LABEL, k, v) for k, v in labels.items()]
    return client.containers.list(all=True, filters={"label": filters}, ignore_removed=True)


def trial_rows(results):
    return rows(results, "SELECT seq, status, reason, throughput FROM trials ORDER BY seq")


def running_trial_container(client, results):
    """The container of the trial that is running now (waits for one)."""
    found = []
    wait_for(lambda: found.extend(c for c in ours(client) if c.status == "running"
                                  and str(results) in json.dumps(c.attrs["Mounts"])) or found, 120,
             "a running container of this run")
    return found[0]


# ---------------------------------------------------------------- no engine
def test_unreachable_engine_is_one_line_that_says_how_to_start_it(write_scenario, tmp_path):
    scenario = write_scenario(CALIBRATE.format(warmup=1, measure=2, repeats=1, iteration_ms=10))
    code, out = finish(detbench("run", "--scenario", str(scenario), "--results", str(tmp_path / "r"),
                                env={"DOCKER_HOST": "unix://%s" % (tmp_path / "no.sock")}))
    assert code == 2
    lines = out.strip().splitlines()
    assert len(lines) == 1, out
    assert "cannot reach the Docker engine" in lines[0] and "dockerd" in lines[0]


# ---------------------------------------------------------------- images
def test_build_records_the_engines_image_id_among_the_images_built_here(client, tmp_path, monkeypatch):
    need_image(client, "calibrate")
    base = image_lock.read_built()["base"]     # this machine's, before the test records its own
    lock = tmp_path / "built.json"
    monkeypatch.setenv("DETBENCH_IMAGES_BUILT", str(lock))
    image_lock.record("base", base, lock)
    entry = images.build("calibrate", out=open(os.devnull, "w"))
    recorded = json.loads(lock.read_text())["calibrate"]
    assert recorded == entry
    assert client.images.get(recorded["image"]).id == recorded["id"]
    assert recorded["build_args"]["BASE_IMAGE"] == client.images.get(base["image"]).id


def test_the_record_of_built_images_matches_the_images_on_this_engine(client):
    lock = image_lock.read_built()
    need_service({"base", "calibrate", "detbench-trainer"} <= set(lock),
                 "%s does not record the base, calibrate and detbench-trainer images (run .ci/provision-docker.sh)"
                 % image_lock.built_path())
    for name in ("base", "calibrate", "detbench-trainer"):
        assert lock[name]["id"].startswith("sha256:") and len(lock[name]["id"]) == 71
        image = engine.local_image(client, lock[name]["image"])
        need_service(image is not None, "image %s not built here (run .ci/provision-docker.sh)" % lock[name]["image"])
        assert image.id == lock[name]["id"], name


def test_image_list_tells_built_from_stale_and_missing(client, tmp_path):
    """A recipe edited after its build is stale, and a stale image is refused before a run, in one line."""
    need_image(client, "calibrate")
    committed = image_lock.read_built()
    lock = tmp_path / "built.json"
    for name in ("base", "calibrate"):
        image_lock.record(name, committed[name], lock)
    recipes = tmp_path / "recipes"
    shutil.copytree(image_lock.RECIPES_DIR / "calibrate", recipes / "calibrate")
    assert images.freshness(client, "calibrate", lock, recipes)[0] == images.BUILT
    assert images.freshness(client, "torchvision", lock, recipes)[:2] == (
        images.MISSING, "no entry in %s" % lock)
    with open(recipes / "calibrate" / "Dockerfile", "a") as f:
        f.write("# edited\n")
    assert images.freshness(client, "calibrate", lock, recipes)[:2] == (images.STALE, "the recipe changed since")


def test_a_failing_build_names_its_step(client, tmp_path, monkeypatch):
    need_image(client, "calibrate")
    base = image_lock.read_built()["base"]["id"]
    monkeypatch.setenv("DETBENCH_IMAGES_BUILT", str(tmp_path / "built.json"))
    recipe = tmp_path / "recipes" / "calibrate"
    recipe.mkdir(parents=True)
    (recipe / "Dockerfile").write_text("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nRUN true\n"
                                       "RUN python3 -c 'raise SystemExit(3)'\n")
    with pytest.raises(UserError) as err:
        images.build("calibrate", base_image=base, recipes_dir=tmp_path / "recipes", out=open(os.devnull, "w"))
    message = str(err.value)
    assert message.startswith(str(recipe / "Dockerfile") + ": step 4/")
    assert "`RUN python3 -c 'raise SystemExit(3)'` failed" in message and "non-zero code: 3" in message
    assert not (tmp_path / "built.json").exists()


# ---------------------------------------------------------------- trials in containers
@pytest.mark.timing
def test_calibration_in_containers_reports_the_truth_and_leaves_nothing(client, write_scenario, tmp_path):
    need_image(client, "calibrate")
    scenario = write_scenario(CALIBRATE.format(warmup=3, measure=20, repeats=2, iteration_ms=50))
    results = tmp_path / "results"
    code, out = finish(detbench("run", "--scenario", str(scenario), "--results", str(results)))
    assert code == 0, out
    rows = trial_rows(results)
    assert [r[1] for r in rows] == ["done", "done"]
    for _, _, _, throughput in rows:
        assert throughput == pytest.approx(40.0, rel=0.01)
    lock = image_lock.read_built()["calibrate"]
    for trial in (results / "trials").iterdir():
        record = json.loads((trial / "trial.json").read_text())
        assert record["container"]["image_id"] == lock["id"]
        assert record["container"]["exit_code"] == 0
    assert ours(client) == [] or all(str(results) not in json.dumps(c.attrs["Mounts"]) for c in ours(client))
    code, table = finish(detbench("report", "--results", str(results), "--platform", "local"))
    # a flag's footnote mark may follow the cell (data time sits right at the 10% line)
    cell = throughput_cell(table, "RetinaNet")
    assert code == 0 and cell and cell[0] == pytest.approx(40.0, rel=0.01), table
    assert cell[1] == pytest.approx(50.0, abs=0.5), table


@pytest.mark.timing
def test_inference_in_containers_gives_the_known_latencies(client, write_scenario, tmp_path):
    need_image(client, "calibrate")
    text = (CALIBRATE.format(warmup=2, measure=20, repeats=1, iteration_ms=20)
            .replace("batch_per_gpu: 2\n", "mode: inference\nbatch_sizes: [2]\npercentiles: [50, 80]\n")
            + "  tail_every: 10\n  tail_ms: 40\n  post_ms: 1\n").replace("data_ms: 5", "data_ms: 2")
    results = tmp_path / "results"
    code, out = finish(detbench("run", "--scenario", str(write_scenario(text)), "--results", str(results)))
    assert code == 0, out
    [(figures,)] = rows(results, "SELECT latency_json FROM trials")
    fig = json.loads(figures)
    trial = next((results / "trials").iterdir())
    # the figures are exactly those of the batch times the container logged (batches 3..22)
    logged = [json.loads(line.split(None, 1)[1]) for line in (trial / "log.txt").read_text().splitlines()
              if line.startswith("DETBENCH_ITER ")]
    times = [r["time_s"] for r in logged if 3 <= r["iteration"] <= 22]
    assert len(times) == 20
    assert fig["mean_s"] == pytest.approx(np.mean(times), rel=1e-9)
    for p in (50, 80):
        assert fig["p%d_s" % p] == pytest.approx(float(np.percentile(times, p)), rel=1e-9), p
    # and those are the designed ones, 18 x 20 ms and 2 x 40 ms (batches 10 and 20), each
    # ending on its deadline; the mean is exact, and the median is the plain batch's
    assert_on_deadlines(times, designed_ms(2, 20, 20.0, 10, 40.0))
    assert fig["mean_s"] * 1000 == pytest.approx(22.0, rel=0.01)
    assert fig["p50_s"] * 1000 == pytest.approx(20.0, abs=1.0)
    record = json.loads((trial / "trial.json").read_text())
    assert record["container"]["recipe"] == "calibrate" and record["container"]["exit_code"] == 0


TRAINER_INFERENCE = """\
name: trainer-inference-docker
backend: docker
mode: inference
matrix:
  framework: [detbench-trainer]
  model: [mask_rcnn]
batch_sizes: [2]
input_size: [64, 96]
warmup: 1
measure: 10
percentiles: [50, 90]
repeats: 1
timeout_s: 300
postprocess: {score_threshold: 0.0, detections_per_image: 5}
env:
  OMP_NUM_THREADS: "2"
options:
  detbench-trainer:
    train.device: cpu
    model.block: basic
    model.layers: "1,1,1,1"
    model.base_width: 16
    model.fpn_channels: 32
    model.num_classes: 4
    model.fc_dim: 64
"""


def test_the_bundled_trainers_inference_runs_in_its_image(client, write_scenario, tmp_path):
    need_image(client, "detbench-trainer")
    results = tmp_path / "results"
    code, out = finish(detbench("run", "--scenario", str(write_scenario(TRAINER_INFERENCE)), "--results", str(results)))
    assert code == 0, out
    [(status, figures)] = rows(results, "SELECT status, latency_json FROM trials")
    fig = json.loads(figures)
    assert status == "done" and fig["batches"] == 10 and fig["detections_per_image"] == 5
    assert fig["p90_s"] >= fig["p50_s"] > 0 and fig["pre_s"] + fig["net_s"] + fig["post_s"] <= fig["mean_s"]
    record = json.loads((next((results / "trials").iterdir()) / "trial.json").read_text())
    assert record["container"]["recipe"] == "detbench-trainer"


def test_container_is_unprivileged_and_mounts_only_the_checkout_and_its_trial(client, write_scenario, tmp_path):
    need_image(client, "calibrate")
    scenario = write_scenario(CALIBRATE.format(warmup=1, measure=30, repeats=1, iteration_ms=100))
    results = tmp_path / "results"
    proc = detbench("run", "--scenario", str(scenario), "--results", str(results))
    try:
        container = running_trial_container(client, results)
        host = container.attrs["HostConfig"]
        assert host["Privileged"] is False
        assert host["CapDrop"] == ["ALL"] and not host.get("CapAdd")
        assert "no-new-privileges" in host["SecurityOpt"]
        assert host["NetworkMode"] == "none"
        assert container.attrs["Config"]["User"] == "%d:%d" % (os.getuid(), os.getgid())
        mounts = {m["Destination"]: m["RW"] for m in container.attrs["Mounts"]}
        trial = str(next((results / "trials").iterdir()))
        assert mounts == {str(ROOT): False, trial: True}
    finally:
        code, out = finish(proc)
    assert code == 0, out


def test_quickstart_retinanet_in_containers_lands_in_the_same_table_as_local_runs(client, tmp_path):
    need_image(client, "detbench-trainer")
    text = (ROOT / "scenarios" / "quickstart.yaml").read_text()
    text = (text.replace("model: [retinanet, faster_rcnn]", "model: [retinanet]")
                .replace("precision: [fp32, bf16]", "precision: [fp32]").replace("repeats: 3", "repeats: 2"))
    scenario = tmp_path / "quickstart-retinanet.yaml"
    scenario.write_text(text)
    local = tmp_path / "calibrate-local.yaml"
    local.write_text(CALIBRATE.format(warmup=2, measure=10, repeats=1, iteration_ms=50).replace(
        "backend: docker\n", ""))
    results = tmp_path / "results"
    code, out = finish(detbench("run", "--scenario", str(scenario), "--backend", "docker", "--results", str(results)))
    assert code == 0, out
    rows = trial_rows(results)
    assert [r[1] for r in rows] == ["done", "done"] and all(r[3] > 0 for r in rows), rows
    code, out = finish(detbench("run", "--scenario", str(local), "--results", str(results)))
    assert code == 0, out
    code, table = finish(detbench("report", "--results", str(results), "--platform", "local"))
    assert code == 0, table
    header = next(l for l in table.splitlines() if l.startswith("|model|"))
    assert header == "|model|calibrate|detbench-trainer (PyTorch)|", table
    retina = next(l for l in table.splitlines() if l.startswith("|RetinaNet|"))
    cells = retina.strip("|").split("|")
    calibrate = throughput_cell(table, "RetinaNet")
    # the column is there with its figure; the figure's 1% truth is pinned on an idle CPU (timing tests)
    assert calibrate and calibrate[0] == pytest.approx(40.0, rel=0.1), table
    assert calibrate[1] == pytest.approx(50.0, rel=0.1), table
    assert not cells[2].startswith("NA"), table
    for trial in (results / "trials").iterdir():
        record = json.loads((trial / "trial.json").read_text())
        if "detbench-trainer" in json.dumps(record.get("argv", [])):
            assert record["container"]["recipe"] == "detbench-trainer"
    assert not [c for c in ours(client) if str(results) in json.dumps(c.attrs["Mounts"])]


def test_a_container_killed_for_memory_is_a_failed_trial_and_the_run_goes_on(client, write_scenario, tmp_path):
    need_image(client, "calibrate")
    text = CALIBRATE.format(warmup=1, measure=3, repeats=2, iteration_ms=20)
    text += "  hold_mb: 200\ndocker:\n  memory: 64m\n"
    results = tmp_path / "results"
    code, out = finish(detbench("run", "--scenario", str(write_scenario(text)), "--results", str(results)))
    assert code == 0, out       # failed trials are results, not a failed run
    rows = trial_rows(results)
    assert [r[1] for r in rows] == ["failed", "failed"], rows
    assert all(r[2].startswith("killed for memory") and "64m" in r[2] for r in rows), rows


# ---------------------------------------------------------------- interruptions
def test_interrupted_run_removes_its_containers_and_resume_finishes(client, write_scenario, tmp_path):
    need_image(client, "calibrate")
    scenario = write_scenario(CALIBRATE.format(warmup=1, measure=25, repeats=3, iteration_ms=80))
    results = tmp_path / "results"
    proc = detbench("run", "--scenario", str(scenario), "--results", str(results))
    container = running_trial_container(client, results)
    proc.send_signal(signal.SIGINT)
    code, out = finish(proc)
    assert code != 0 and "--resume" in out, out
    wait_for(lambda: not [c for c in ours(client) if c.id == container.id], 30, "the container to be removed")
    run_id = out.split("run ", 1)[1].split(":", 1)[0]
    code, out = finish(detbench("run", "--resume", run_id, "--results", str(results)))
    assert code == 0, out
    rows = trial_rows(results)
    assert [r[1] for r in rows] == ["done"] * 3, rows


def test_killed_run_leaves_no_container_and_resume_finishes(client, write_scenario, tmp_path):
    need_image(client, "calibrate")
    scenario = write_scenario(CALIBRATE.format(warmup=1, measure=25, repeats=3, iteration_ms=80))
    results = tmp_path / "results"
    proc = detbench("run", "--scenario", str(scenario), "--results", str(results))
    container = running_trial_container(client, results)
    proc.kill()
    proc.communicate()
    # the reaper sees its run die and removes the container the run can no longer remove
    wait_for(lambda: not [c for c in ours(client) if c.id == container.id], 30, "the container to be removed")
    run_id = next(results.glob("trials/*")).name.rsplit("-", 1)[0]
    code, out = finish(detbench("run", "--resume", run_id, "--results", str(results)))
    assert code == 0, out
    assert [r[1] for r in trial_rows(results)] == ["done"] * 3


def test_next_run_removes_orphans_of_a_dead_owner(client, write_scenario, tmp_path):
    need_image(client, "calibrate")
    dead = subprocess.Popen(["true"])
    dead.wait()
    tag = image_lock.read_built()["calibrate"]["image"]
    import socket
    orphan = client.containers.run(tag, ["sleep", "300"], detach=True, network_mode="none", labels={
        engine.LABEL: "1", engine.LABEL + ".owner": "gone", engine.LABEL + ".host": socket.gethostname(),
        engine.LABEL + ".pid": str(dead.pid), engine.LABEL + ".trial": "none"})
    try:
        scenario = write_scenario(CALIBRATE.format(warmup=1, measure=2, repeats=1, iteration_ms=10))
        code, out = finish(detbench("run", "--scenario", str(scenario), "--results", str(tmp_path / "r")))
        assert code == 0, out
        assert "removed 1 container(s) left by an earlier run" in out
        assert not [c for c in ours(client) if c.id == orphan.id]
    finally:
        try:
            orphan.remove(force=True)
        except Exception:
            pass
