"""benchmarks/trainer_vs_rivals.py writes a scenario detbench accepts for any choice of models,
precisions and frameworks (the run itself is the benchmark's, not the suite's)."""
import argparse

import pytest
import yaml

from benchmarks import trainer_vs_rivals
from harness import launch


@pytest.mark.parametrize("frameworks, precisions, size", [
    (("detbench-trainer", "torchvision", "mmdetection"), ["fp32", "bf16"], "320x320"),
    (("detbench-trainer", "torchvision", "mmdetection"), ["fp32"], "512x512"),     # a CPU without bf16 kernels
    (("detbench-trainer", "torchvision"), ["bf16"], "320x320"),
])
def test_the_written_scenario_loads_with_only_the_exclusions_that_still_match(tmp_path, frameworks, precisions,
                                                                              size):
    args = argparse.Namespace(models=["retinanet", "mask_rcnn"], precisions=precisions,
                              warmup=2, measure=8, repeats=5)
    doc, data = trainer_vs_rivals.scenario(args, str(tmp_path), frameworks, size)
    assert data == str(tmp_path / ("coco-" + size))     # one generated set per size
    (tmp_path / ("coco-" + size) / "annotations").mkdir(parents=True)     # what the benchmark makes before it runs
    (tmp_path / ("coco-" + size) / "images").mkdir()
    (tmp_path / ("coco-" + size) / "annotations" / "instances_train.json").write_text("{}")
    assert sorted(doc.pop("weights")) == sorted(args.models)   # made by `detbench weights make`, checked elsewhere
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    sc = launch.load_scenario(path)
    assert sc.repeats == 5 and list(sc.input_size) == [int(v) for v in size.split("x")]
    kept = [(e["framework"], e.get("precision")) for e in doc["exclude"]]
    assert kept == ([("mmdetection", "bf16")] if "mmdetection" in frameworks and "bf16" in precisions else [])


def test_a_process_setting_from_env_reaches_every_framework_of_the_scenario(tmp_path):
    tunables = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=2147483647"
    args = argparse.Namespace(models=["faster_rcnn"], precisions=["fp32"], warmup=2, measure=8, repeats=3,
                              env=trainer_vs_rivals.parse_env(["GLIBC_TUNABLES=" + tunables]))
    doc, _ = trainer_vs_rivals.scenario(args, str(tmp_path), ("detbench-trainer", "torchvision"), "320x320")
    # the scenario's env is every trial's, whatever its framework; the thread count stays
    assert doc["env"]["GLIBC_TUNABLES"] == tunables
    assert doc["env"]["OMP_NUM_THREADS"] == "2"
    assert "GLIBC_TUNABLES" not in str(doc["options"])


@pytest.mark.parametrize("item", ["GLIBC_TUNABLES", "=x", "1A=2", "A B=1"])
def test_an_env_item_that_is_not_name_equals_value_is_refused_naming_it(item):
    with pytest.raises(trainer_vs_rivals.Refusal, match="--env %r" % item):
        trainer_vs_rivals.parse_env([item])


def test_the_configs_own_size_gets_a_short_window_and_breakdown_asks_every_trial_for_its_phases(tmp_path):
    assert trainer_vs_rivals.SIZES == ("320x320", "512x512", "800x1344")
    args = argparse.Namespace(models=["mask_rcnn"], precisions=["fp32", "bf16"], warmup=None, measure=None,
                              repeats=3, breakdown=True)
    doc, _ = trainer_vs_rivals.scenario(args, str(tmp_path), ("detbench-trainer", "torchvision"), "800x1344")
    assert (doc["input_size"], doc["warmup"], doc["measure"], doc["breakdown"]) == ([800, 1344], 1, 3, True)
    small, _ = trainer_vs_rivals.scenario(argparse.Namespace(models=["mask_rcnn"], precisions=["fp32"], warmup=None,
                                                             measure=5, repeats=3),
                                          str(tmp_path), ("detbench-trainer",), "512x512")
    assert (small["warmup"], small["measure"]) == (2, 5) and "breakdown" not in small
