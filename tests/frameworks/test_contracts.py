"""What every entry of a registry promises, checked for every entry it lists.

Parametrized over the registries themselves (harness.frameworks.FRAMEWORKS,
harness.measure.scrapers.SCRAPERS, harness.launch.LAUNCHERS), so an entry is held to its
contract the moment it is listed. What one entry does beyond the contract is tested with it
(tests/frameworks/test_frameworks_rivals.py, tests/frameworks/test_rivals_cells.py, tests/scrapers/).
"""
import dataclasses
import inspect
import os
from pathlib import Path

import pydantic
import pytest
from click.testing import CliRunner

from harness import jsonlog, launch
from harness.cli import main
from harness.errors import UserError
from harness.frameworks import FRAMEWORKS
from harness.frameworks.base import CONTAINER_ONLY, NEEDS_GPU, RUNS_HERE, TRIAL_DIR, Link, TrialContext
from harness.launch import base
from harness.plan import trialfiles
from harness.measure import scrapers
from harness.measure.records import IterationRecord, ScrapeError
from harness.vocab import catalog
from harness.plan import scenario as scenario_mod
from harness.plan.strict import Strict

FIXTURES = Path(__file__).resolve().parents[1] / "scrapers" / "fixtures"
COCO = {"annotations": "/d/ann.json", "images": "/d/img"}

# format -> the logs in tests/scrapers/fixtures written in it; a new format needs one here
SAMPLE_LOGS = {
    "mmdet-v1": ["mmdet_v1.log", "mmdet_v1.log.json"],
    "mmdet-v2": ["mmdet_v2.log", "mmdet_v2_iter.log", "mmdet_v2.log.json"],
    "mmdet-v3": ["mmdet_v3.log", "mmdet_v3_vis.json"],
    "maskrcnn-benchmark": ["maskrcnn_benchmark.log"],
    "detectron2": ["detectron2.log", "detectron2_v06.log", "detectron2_2019.log", "detectron2_metrics.json"],
    "torchvision-ref": ["torchvision_ref.log"],
    "simpledet-mxnet": ["simpledet_mxnet.log", "simpledet_mxnet_old.log"],
    "dllogger": ["dllogger_pytorch.log", "dllogger_tf2_time_log.txt"],
    "effdet": ["effdet.log"],
    "detectron": ["detectron.log", "detectron_truncated.log"],
    "tensorpack": ["tensorpack.log", "tensorpack_short.log"],
}
# detbench-jsonl, the harness's own format, is written by its own writer
GENERATED = {
    "detbench-jsonl": [jsonlog.iter_line(i, 0.25, 0.01, 4, loss=1.0) for i in (1, 2, 3)],
}

GARBAGE = ["", " ", "garbage", "\x00\x01\x02", "\ufffd\ufffd", "{", "{not json}", "[]", "null",
           '{"iteration": "x", "time": []}', jsonlog.ITER_PREFIX + "{", jsonlog.ITER_PREFIX + "[1, 2]",
           "Epoch [", "Epoch [1][x/y]\tlr: ", "iter: 19  time: fast  data: none", "Train: 0 [",
           "DLLL {", "DLL x y - ", "Epoch[0] Batch [", "\x1b[0m\x1b[", "[rank1]:", "0: 1: 2: ",
           "nan inf -inf", "9" * 5000, "x" * 100000]


def samples(fmt):
    """The sample logs of `fmt`, each as (name, lines)."""
    if fmt in GENERATED:
        return [(fmt, GENERATED[fmt])]
    assert fmt in SAMPLE_LOGS, "no sample log of format %r: name its fixtures in SAMPLE_LOGS" % fmt
    return [(name, (FIXTURES / name).read_text(encoding="utf-8").splitlines()) for name in SAMPLE_LOGS[fmt]]


# frameworks whose every trial trains a fixed number of images per device (the others take 2 here)
FIXED_BATCH = {"tensorpack": 1}


def ctx(name, model, precision, data=COCO):
    # EfficientDet's pyramid takes sides that are multiples of 128
    size = (384, 384) if model == "efficientdet_d0" else (320, 320)
    return TrialContext(framework=name, model=model, precision=precision, gpus=1, nodes=1,
                        batch_per_gpu=FIXED_BATCH.get(name, 2),
                        input_size=size, iterations=25, data=data, python="/env/bin/python")


def claims():
    """(framework, model, precision) for every model and precision each framework claims."""
    return [(name, model, precision) for name, fw in FRAMEWORKS.items()
            for model in sorted(fw.models) for precision in sorted(fw.precisions)]


def is_json_value(value):
    if isinstance(value, dict):
        return all(isinstance(k, str) and is_json_value(v) for k, v in value.items())
    if isinstance(value, list):
        return all(is_json_value(v) for v in value)
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    return value is None or isinstance(value, (str, int, bool))


# ------------------------------------------------------------------ frameworks

@pytest.fixture(scope="module")
def frameworks_listing():
    out = CliRunner().invoke(main, ["frameworks"])
    assert out.exit_code == 0, out.output
    return out.output


@pytest.mark.parametrize("name", sorted(FRAMEWORKS))
def test_a_framework_declares_what_it_is_and_is_listed(name, frameworks_listing):
    fw = FRAMEWORKS[name]
    assert fw.name == name
    assert fw.status in (RUNS_HERE, NEEDS_GPU, CONTAINER_ONLY)
    assert fw.title and fw.why and fw.figures
    assert fw.models and fw.models <= set(catalog.MODELS)     # a scenario's matrix can name them
    assert fw.precisions and fw.precisions <= set(catalog.PRECISIONS)
    assert any(line.split()[:1] == [name] and fw.why in line for line in frameworks_listing.splitlines())


@pytest.mark.parametrize("name", sorted(FRAMEWORKS))
def test_a_frameworks_scraper_reads_its_format_with_the_declared_options(name):
    fw = FRAMEWORKS[name]
    assert fw.scraper in scrapers.SCRAPERS
    for sample, lines in samples(fw.scraper):
        records, errors = scrapers.get(fw.scraper)(lines, **fw.scrape_options)
        assert records, "%s read no record from %s with %s" % (fw.scraper, sample, fw.scrape_options)
        assert all(isinstance(r, IterationRecord) for r in records)
        assert all(isinstance(e, ScrapeError) for e in errors)


@pytest.mark.parametrize("name,model,precision", claims())
def test_a_framework_builds_every_trial_it_claims(name, model, precision, tmp_path):
    fw = FRAMEWORKS[name]
    assert fw.supports(model, precision)
    context = ctx(name, model, precision)
    argv = fw.command(context)
    assert isinstance(argv, list) and argv and argv[0], argv
    assert all(isinstance(a, str) for a in argv), argv     # an item may be "" (MODEL.WEIGHTS "")
    settings = fw.settings(context)
    assert isinstance(settings, dict) and is_json_value(settings), settings
    files = fw.trial_files(context)
    assert all(isinstance(k, str) and isinstance(v, (str, Link)) for k, v in files.items()), files
    # what every launcher does before the start: the files written, the folder filled in
    filled = trialfiles.prepare(tmp_path, argv, files)
    assert not any(TRIAL_DIR in a for a in filled)
    written = {name for name, item in files.items() if not isinstance(item, Link)}
    linked = {name.split("/")[0] for name, item in files.items() if isinstance(item, Link)}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(written | linked)
    for name, item in files.items():
        if isinstance(item, Link):
            assert os.readlink(str(tmp_path / name)) == item.target


@pytest.mark.parametrize("name", sorted(FRAMEWORKS))
def test_a_framework_without_files_to_read_builds_or_says_why(name):
    """Synthetic data (no COCO files): an argv, or a UserError a scenario check turns into a line."""
    fw = FRAMEWORKS[name]
    model, precision = sorted(fw.models)[0], sorted(fw.precisions)[0]
    try:
        argv = fw.command(ctx(name, model, precision, data=None))
    except UserError as exc:
        assert str(exc)
    else:
        assert argv and all(isinstance(a, str) for a in argv)


def infer_claims():
    """(framework, model, precision) of every inference cell each framework claims."""
    return [(name, model, precision) for name, fw in FRAMEWORKS.items() if fw.infer is not None
            for model in sorted(fw.infer_models) for precision in sorted(fw.infer_precisions)]


@pytest.mark.parametrize("name", sorted(FRAMEWORKS))
def test_an_inference_path_is_declared_whole_or_not_at_all(name):
    fw = FRAMEWORKS[name]
    if fw.infer is None:
        assert not fw.infer_models and not fw.infer_precisions and fw.infer_settings is None
        return
    assert fw.infer_why and fw.infer_settings is not None
    assert fw.infer_models and fw.infer_models <= set(catalog.MODELS)
    assert fw.infer_precisions and fw.infer_precisions <= set(catalog.PRECISIONS)


@pytest.mark.parametrize("name,model,precision", infer_claims())
def test_a_framework_builds_every_inference_trial_it_claims(name, model, precision):
    fw = FRAMEWORKS[name]
    context = dataclasses.replace(ctx(name, model, precision, data=None), batch_per_gpu=4, input_size=(384, 512),
                                  inference={"score_threshold": 0.05, "nms_threshold": 0.5,
                                             "detections_per_image": 100})
    argv = fw.argv(context)
    assert argv == fw.infer(context)
    try:
        assert argv != fw.command(dataclasses.replace(context, inference=None))
    except UserError:
        pass          # its training needs what an inference trial does not (mmdetection: COCO files)
    assert all(isinstance(a, str) for a in argv), argv
    settings = fw.trial_settings(context)
    assert is_json_value(settings) and settings["images_per_device"] == 4, settings
    assert fw.reading(context) == ("detbench-jsonl", {})    # every inference driver prints the same lines


# ------------------------------------------------------------------ scrapers

@pytest.mark.parametrize("fmt", sorted(scrapers.SCRAPERS))
def test_a_scraper_returns_records_and_errors_on_an_empty_log(fmt):
    assert scrapers.SCRAPERS[fmt]([]) == ([], [])


@pytest.mark.parametrize("fmt", sorted(scrapers.SCRAPERS))
def test_a_scraper_never_raises_on_garbage_or_another_format(fmt):
    scrape = scrapers.SCRAPERS[fmt]
    records, errors = scrape(GARBAGE)
    assert records == [] and all(isinstance(e, ScrapeError) for e in errors)
    for other in sorted(set(SAMPLE_LOGS) | set(GENERATED)):
        for _, lines in samples(other):
            records, errors = scrape(lines)
            assert all(isinstance(r, IterationRecord) for r in records)
            assert all(isinstance(e, ScrapeError) for e in errors)


@pytest.mark.parametrize("fmt", sorted(scrapers.SCRAPERS))
def test_a_scraper_reads_its_own_samples(fmt):
    for sample, lines in samples(fmt):
        records, _ = scrapers.SCRAPERS[fmt](lines)
        assert records, "%s read no record from %s" % (fmt, sample)


# ------------------------------------------------------------------ launchers

CLASS_METHODS = ("check", "pythons", "dry_run", "preflight")   # run.py calls them on the class


def interface_call(method):
    """Arguments for `method` as the interface declares them: required ones by position,
    optional ones by keyword."""
    params = list(inspect.signature(getattr(base.Launcher, method)).parameters.values())
    params = [p for p in params if p.name != "self"]
    args = [object() for p in params if p.default is inspect.Parameter.empty]
    kwargs = {p.name: object() for p in params if p.default is not inspect.Parameter.empty}
    return args, kwargs


@pytest.mark.parametrize("name", sorted(launch.LAUNCHERS))
def test_a_launcher_answers_the_whole_interface(name):
    cls = launch.LAUNCHERS[name]
    missing = [a for a in base.ATTRIBUTES + base.METHODS if not hasattr(cls, a)]
    assert not missing, "%s lacks %s" % (cls.__name__, ", ".join(missing))
    assert all(callable(getattr(cls, m)) for m in base.METHODS)
    assert cls.name == name
    assert isinstance(cls.runs_here, bool)
    assert cls.rendezvous is None or isinstance(cls.rendezvous, str)
    for method in base.METHODS:
        args, kwargs = interface_call(method)
        if method in CLASS_METHODS:
            assert isinstance(inspect.getattr_static(cls, method), (staticmethod, classmethod)), \
                "%s.%s is called on the class: a staticmethod" % (cls.__name__, method)
        else:   # called on an instance
            args = [object()] + args
        try:
            inspect.signature(getattr(cls, method)).bind(*args, **kwargs)
            problem = None
        except TypeError as exc:
            problem = str(exc)
        assert problem is None, "%s.%s cannot take the interface's call %s: %s" % (
            cls.__name__, method, inspect.signature(getattr(base.Launcher, method)), problem)


@pytest.mark.parametrize("name", sorted(launch.LAUNCHERS))
def test_a_launchers_options_are_a_strict_section_named_after_it(name):
    options = launch.LAUNCHERS[name].options
    if options is None:
        return
    assert isinstance(options, type) and issubclass(options, pydantic.BaseModel)
    assert issubclass(options, Strict)                      # a typo in the section is an error
    assert name not in scenario_mod.Scenario.model_fields   # the section shadows no scenario field
    assert name in scenario_mod.model_for(launch.LAUNCHERS).model_fields


def test_every_launcher_is_listed_with_its_one_line():
    out = CliRunner().invoke(main, ["backends"])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    for name, cls in launch.LAUNCHERS.items():
        doc = (cls.__doc__ or "").strip()
        assert doc, "%s has no docstring for `detbench backends`" % cls.__name__
        assert any(line.split()[:1] == [name] and doc.splitlines()[0] in line for line in lines)
