"""The bundled trainer's one time definition, its work lines, and process-level settings it
leaves to the scenario."""
import ctypes
import ctypes.util
import json
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch", reason="the trainer needs torch (pip install torch torchvision)")
pytest.importorskip("torchvision", reason="the trainer needs torchvision")

from conftest import ROOT, config_path, env_for_subprocess, parse_lines  # noqa: E402

from harness import jsonlog  # noqa: E402

LOG_DELAY_S = 0.3


class SlowLog:
    """An output stream that takes LOG_DELAY_S to write each iteration's log lines."""

    def __init__(self):
        self.text = []

    def write(self, text):
        if jsonlog.ITER_PREFIX in text:
            time.sleep(LOG_DELAY_S)
        self.text.append(text)
        return len(text)

    def flush(self):
        pass


def build(config, *sets):
    from harness.trainer import data, engine
    from harness.trainer.config import apply_overrides, load_config_module
    module = load_config_module(config_path(config))
    cfg = apply_overrides(module.CONFIG, list(sets))
    torch.manual_seed(0)
    device = torch.device("cpu")
    model = engine.prepare_model(module.build_detector(cfg), cfg, device, 1)
    return model, data.build_batches(cfg, device, 0, 1), cfg, device


def work_lines(text):
    return [json.loads(line[len(jsonlog.WORK_PREFIX):]) for line in text.splitlines()
            if line.startswith(jsonlog.WORK_PREFIX)]


def test_the_logging_between_iterations_belongs_to_the_next_iteration():
    from harness.trainer import engine
    model, batches, cfg, device = build("retina_tiny", "train.max_iter=4")
    out = SlowLog()
    start = time.perf_counter()
    engine.train(model, batches, cfg, device, 1, out=out)
    wall = time.perf_counter() - start
    iters, _ = parse_lines("".join(out.text))
    assert [r["iteration"] for r in iters] == [1, 2, 3, 4]
    for r in iters[1:]:
        # the slow log of the previous iteration is in this one's time, not in its data time
        assert r["time_s"] > LOG_DELAY_S
        assert r["data_time_s"] < LOG_DELAY_S
    # no gap belongs to no iteration: the times add up to the loop's wall time, less the
    # last iteration's log (nothing follows it) and the optimizer's set-up
    total = sum(r["time_s"] for r in iters)
    assert wall - LOG_DELAY_S - 0.1 < total <= wall - LOG_DELAY_S + 0.01


@pytest.mark.parametrize("config", ["retina_tiny", "faster_tiny", "mask_tiny"])
def test_each_iteration_logs_its_work(capsys, config):
    from harness.trainer import train
    from harness.trainer.config import load_config_module
    m = load_config_module(config_path(config)).CONFIG.model
    assert train.main([config_path(config), "--set", "train.max_iter=3"]) == 0
    work = work_lines(capsys.readouterr().out)
    assert [w["iteration"] for w in work] == [1, 2, 3]
    images = 2
    for w in work:
        if config == "retina_tiny":
            assert set(w) == {"iteration", "positive_anchors"}
            assert w["positive_anchors"] > 0           # every synthetic image has boxes
            continue
        expected = {"iteration", "proposals", "sampled_rois", "positive_rois"}
        assert set(w) == expected | ({"mask_rois"} if config == "mask_tiny" else set())
        assert 0 < w["proposals"] <= m.rpn_post_nms_top_n_train * images
        # enough candidates: the sampler fills its quota, positives at most their fraction
        assert w["sampled_rois"] == m.roi_batch_per_image * images
        assert 0 < w["positive_rois"] <= m.roi_batch_per_image * m.roi_positive_fraction * images
        if config == "mask_tiny":
            assert w["mask_rois"] == min(w["positive_rois"], m.mask_max_rois_per_image * images)


@pytest.mark.parametrize("config", ["retina_tiny", "faster_tiny"])
def test_images_without_boxes_have_no_positives(capsys, config):
    from harness.trainer import train
    assert train.main([config_path(config), "--set", "train.max_iter=2",
                       "--set", "data.synthetic_max_boxes=0"]) == 0
    for w in work_lines(capsys.readouterr().out):
        assert w.get("positive_anchors", 0) == 0 and w.get("positive_rois", 0) == 0


MALLOC_PROBE = """
import ctypes, sys
sys.path.insert(0, {root!r})
from harness.trainer import train
assert train.main([{config!r}, "--set", "train.max_iter=1"]) == 0

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL({libc!r})
libc.mallinfo2.restype = MallInfo2
before = libc.mallinfo2().hblkhd
block = ctypes.create_string_buffer(64 << 20)   # above glibc's largest dynamic mmap threshold
print("MMAPPED_MB", (libc.mallinfo2().hblkhd - before) >> 20)
"""


def mmapped_mb_after_training(extra_env):
    libc = ctypes.util.find_library("c")
    if not libc or not hasattr(ctypes.CDLL(libc), "mallinfo2"):
        pytest.skip("needs glibc 2.33 or newer (mallinfo2)")
    env = env_for_subprocess()
    env.pop("GLIBC_TUNABLES", None)
    env.update(extra_env)
    probe = MALLOC_PROBE.format(root=ROOT, config=config_path("retina_tiny"), libc=libc)
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (line,) = [ln for ln in done.stdout.splitlines() if ln.startswith("MMAPPED_MB")]
    return int(line.split()[1])


def test_the_trainer_sets_no_allocator_options_of_its_own():
    # glibc serves a 64 MiB block with mmap unless someone set mmap_max=0 (what the trainer
    # used to do on the CPU, and what only the scenario's env may do now, for every framework)
    assert mmapped_mb_after_training({}) >= 64
    assert mmapped_mb_after_training({"GLIBC_TUNABLES": "glibc.malloc.mmap_max=0"}) == 0


def test_threads_come_from_the_scenario_env(train_inprocess):
    rc, _, metas, err = train_inprocess("faster_tiny", "train.max_iter=1")
    assert rc == 0, err
    assert metas[0]["threads"] == torch.get_num_threads()
    from harness.trainer.config import ConfigError
    from harness.trainer.train import check_threads
    assert check_threads(0, "2") == 0               # leave torch's count (it follows OMP_NUM_THREADS)
    assert check_threads(2, "2") == 2 and check_threads(3, None) == 3
    with pytest.raises(ConfigError, match="train.threads=3 differs from OMP_NUM_THREADS=2"):
        check_threads(3, "2")


def test_a_second_thread_count_is_refused_with_exit_2():
    env = env_for_subprocess()
    env["OMP_NUM_THREADS"] = "1"
    done = subprocess.run([sys.executable, "-m", "harness.trainer.train", config_path("retina_tiny"),
                           "--set", "train.max_iter=1", "--set", "train.threads=2"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert "train.threads=2 differs from OMP_NUM_THREADS=1" in done.stderr


@pytest.mark.parametrize("config", ["retina_r50v1_fpn_1x", "faster_r50v1_fpn_1x", "mask_r50v1_fpn_1x"])
def test_the_adapter_reports_the_model_settings_the_configs_train_with(config):
    # the harness does not import the trainer, so its adapter states these values itself
    from harness.frameworks import detbench_trainer
    from harness.trainer.config import load_config_module
    model = load_config_module(config_path(config)).CONFIG.model
    for name, value in detbench_trainer.MODEL_DEFAULTS.items():
        assert getattr(model, name) == value, name


def test_the_adapter_reports_the_learning_rate_the_configs_train_with():
    from harness.frameworks import detbench_trainer
    from harness.trainer.config import load_config_module
    for model, name in detbench_trainer.CONFIGS.items():
        train = load_config_module(config_path(name[:-3])).CONFIG.train
        assert train.lr == detbench_trainer.CONFIG_LR[model], model
        for key, value in detbench_trainer.TRAIN_DEFAULTS.items():
            assert getattr(train, key) == value, (model, key)


def test_unshuffled_coco_batches_follow_the_files_order():
    from harness.trainer.data import InfiniteShardedSampler
    order = InfiniteShardedSampler(5, 0, 1, seed=3, shuffle=False)
    it = iter(order)
    assert [next(it) for _ in range(12)] == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1]
    shuffled = iter(InfiniteShardedSampler(5, 0, 1, seed=3))
    first = [next(shuffled) for _ in range(5)]
    assert sorted(first) == [0, 1, 2, 3, 4] and first != [0, 1, 2, 3, 4]
