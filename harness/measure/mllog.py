"""One MLPerf Training result file (`result_N.txt`, MLLOG lines) read through mlperf_logging.

The lines are parsed by the round's own parser (`mlp_parser.ruleset_XYZ.string_to_logline`,
numbered by their line in the file) and checked by the round's compliance rules
(`ComplianceChecker.check_loglines` on those same lines, so the file is parsed once). What
detbench keeps of a file is a `Result`: time to train (run_stop - run_start, the official
figure), the accuracy curve with the target the closed division's rules set, the epochs (or
blocks) with their images/s, batch sizes, the time spent before the run started and in
evaluation, the status run_stop gives, and the first message of the compliance check.

A file whose run cannot be read at all (no MLLOG line, a line the parser refuses, no run_start,
two run_starts, no run_stop) raises UserError naming the file and line; the summarizer drops
such a file as it drops one that fails the rules.
"""

import dataclasses
import importlib
import os
import re
from typing import Any, Dict, List, Optional, Tuple

from harness.errors import UserError, located

TOKEN = ":::MLLOG "
USAGE = "training"
# The training images the closed division's data set holds per epoch: COCO 2017 train with
# annotations (Mask R-CNN), the MLPerf OpenImages subset (RetinaNet, "ssd" from round 2.0).
EPOCH_IMAGES = {"maskrcnn": 117266, "ssd": 1170301}


def _library() -> Any:
    try:
        return importlib.import_module("mlperf_logging.compliance_checker.mlp_compliance")
    except ImportError:
        raise UserError(
            "MLPerf results are read through the mlperf-logging package: pip install mlperf-logging"
        ) from None


def known_rulesets() -> List[str]:
    """The training rulesets the installed mlperf_logging has rules for ("2.0.0", ...)."""
    folder = os.path.dirname(_library().__file__)
    found = (re.fullmatch(USAGE + r"_(\d+\.\d+\.\d+)", name) for name in os.listdir(folder))
    return sorted((m.group(1) for m in found if m), key=lambda v: tuple(int(p) for p in v.split(".")))


def ruleset(round_name: str) -> str:
    """ "2.0", "v2.0" or "2.0.0" -> "2.0.0"; UserError for a round the rules do not know."""
    m = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.(\d+))?", round_name.strip())
    known = known_rulesets()
    name = "%s.%s.%s" % (m.group(1), m.group(2), m.group(3) or "0") if m else round_name
    if name not in known:
        raise UserError(
            "round %s: mlperf-logging has no training rules for it (known rounds: %s)"
            % (round_name, ", ".join(v.rsplit(".", 1)[0] for v in known))
        )
    return name


def targets(rules: str, benchmark: str) -> Dict[str, float]:
    """The closed division's target of `benchmark` in ruleset `rules`, read off its eval_accuracy rule:
    {"": 0.34} for a single figure, {"BBOX": 0.377, "SEGM": 0.339} for Mask R-CNN."""
    path = os.path.join(os.path.dirname(_library().__file__), "%s_%s" % (USAGE, rules), "closed_%s.yaml" % benchmark)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return {}
    rule = re.search(r"NAME:\s*eval_accuracy\b.*?ATLEAST_ONE_CHECK:\s*\"([^\"]*)\"", text, re.S)
    if not rule:
        return {}
    found = re.findall(r"v\['value'\](?:\['(\w+)'\])?\s*>=\s*([0-9.]+)", rule.group(1))
    return {metric: float(value) for metric, value in found}


@dataclasses.dataclass(frozen=True)
class EvalPoint:
    epoch: Optional[float]
    seconds: float  # since run_start
    accuracy: Dict[str, float]  # {"": AP} or {"BBOX": .., "SEGM": ..}


@dataclasses.dataclass(frozen=True)
class Epoch:
    """One epoch (or block of epochs) the log brackets: its first epoch number, how many, its seconds."""

    first: Optional[float]
    count: float
    start_s: float  # since run_start
    seconds: float


@dataclasses.dataclass(frozen=True)
class Result:
    path: str
    benchmark: str
    division: str
    org: str
    platform: str
    status: str  # run_stop's: success, aborted (or "" where it gives none)
    run_start_ms: float
    run_stop_ms: float
    init_s: Optional[float]  # first init_start to run_start
    global_batch: Optional[int]
    local_batch: Optional[int]
    seed: Optional[int]
    curve: Tuple[EvalPoint, ...]
    epochs: Tuple[Epoch, ...]
    eval_s: float  # summed eval_start..eval_stop
    compliance: Optional[str]  # the checker's first message; None where every rule passes
    benchmark_line: int = 0  # the submission_benchmark line

    @property
    def seconds(self) -> float:
        return (self.run_stop_ms - self.run_start_ms) / 1000.0

    @property
    def minutes(self) -> float:
        """The official time to train, as the summarizer computes it."""
        return (self.run_stop_ms - self.run_start_ms) / 60.0 / 1000.0

    def as_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    @staticmethod
    def from_dict(d: Dict[str, Any]) -> "Result":
        values = dict(d)
        values["curve"] = tuple(EvalPoint(**p) for p in d.get("curve", ()))
        values["epochs"] = tuple(Epoch(**e) for e in d.get("epochs", ()))
        names = {f.name for f in dataclasses.fields(Result)}
        return Result(**{k: v for k, v in values.items() if k in names})


def time_to_target(curve: Tuple[EvalPoint, ...], target: Dict[str, float]) -> Optional[float]:
    """Seconds from run_start to the first evaluation that meets every metric of the target."""
    if not target:
        return None
    for point in curve:
        if all(point.accuracy.get(m, float("-inf")) >= v for m, v in target.items()):
            return point.seconds
    return None


def epoch_rate(result: Result, epoch: Epoch, accelerators: int) -> Optional[Tuple[float, float]]:
    """(images/s per accelerator, its relative bound) over one epoch: the closed data set's images
    per epoch over the epoch's seconds between its MLLOG stamps. The bound: each stamp is a whole
    millisecond, and an epoch may leave out its last partial global batch. None where the data
    set is not the closed division's, or the epoch has no length."""
    images = EPOCH_IMAGES.get(result.benchmark)
    if images is None or result.division != "closed" or epoch.seconds <= 0 or accelerators < 1:
        return None
    bound = 0.001 / epoch.seconds + (result.global_batch or 0) / float(images)
    return images * epoch.count / epoch.seconds / accelerators, bound


def read_result(path: str, rules: str) -> Result:
    """Read and check one result file; UserError (file and line) where its run cannot be read."""
    lines = _parse(path, rules)
    mlp_compliance = _library()
    checker = mlp_compliance.make_checker(usage=USAGE, ruleset=rules, quiet=True, werror=False)
    try:
        checker.check_loglines(lines, "%s_%s/common.yaml" % (USAGE, rules))
        messages = list(checker.overwritable.values()) + list(checker.not_overwritable)
    except OSError as exc:  # a benchmark the round has no rules for: the checker looks for its file
        messages = ["the round's rules do not cover this log: %s" % (exc.strerror or exc)]
    finally:
        del mlp_compliance.enqueued_configs[:]  # the checker's queue is its module's: leave it empty
    compliance = messages[0].split("\n")[0] if messages else None
    return _summarise(path, lines, compliance)


def _parse(path: str, rules: str) -> List[Any]:
    parser = importlib.import_module("mlperf_logging.compliance_checker.mlp_parser.ruleset_" + rules.replace(".", ""))
    lines: List[Any] = []
    try:
        with open(path, encoding="latin-1") as f:  # the parser's own encoding: any byte reads
            for number, text in enumerate(f, 1):
                if "\x00" in text:
                    raise UserError(located(path, number, None, "not a text file (NUL byte)"))
                at = text.find(TOKEN)
                if at < 0:
                    continue
                try:
                    lines.append(parser.string_to_logline(number, text[at:].strip()))
                except (ValueError, KeyError, TypeError) as exc:
                    raise UserError(located(path, number, None, "not an MLLOG record: %s" % (exc,))) from None
    except OSError as exc:
        raise UserError(located(path, None, None, "cannot read: %s" % exc.strerror)) from None
    if not lines:
        raise UserError(located(path, 1, None, "not an MLLOG result file: no %r line" % TOKEN.strip()))
    return lines


def _summarise(path: str, lines: List[Any], compliance: Optional[str]) -> Result:
    first: Dict[str, Any] = {}
    starts = [ll for ll in lines if ll.key == "run_start"]
    stops = [ll for ll in lines if ll.key == "run_stop"]
    if not starts:
        raise UserError(located(path, lines[0].lineno, "run_start", "missing: the run never started"))
    if len(starts) > 1:
        raise UserError(
            located(path, starts[1].lineno, "run_start", "a second run_start (the first at line %d)" % starts[0].lineno)
        )
    if not stops:
        raise UserError(
            located(path, lines[-1].lineno, "run_stop", "missing: the log ends before the run stopped (truncated?)")
        )
    t0 = starts[0].timestamp
    curve: List[EvalPoint] = []
    spans: Dict[str, List[Epoch]] = {"epoch": [], "block": []}
    open_spans: Dict[str, Any] = {}
    eval_ms = 0.0
    for ll in lines:
        meta = ll.value.get("metadata") or {}
        value = ll.value.get("value")
        first.setdefault(ll.key, ll)
        if ll.key == "eval_accuracy":
            accuracy = value if isinstance(value, dict) else {"": value}
            accuracy = {str(k): float(v) for k, v in accuracy.items() if isinstance(v, (int, float))}
            curve.append(EvalPoint(_number(meta.get("epoch_num")), (ll.timestamp - t0) / 1000.0, accuracy))
        elif ll.key in ("epoch_start", "block_start", "eval_start"):
            open_spans[ll.key[:-6]] = ll
        elif ll.key in ("epoch_stop", "block_stop", "eval_stop") and ll.key[:-5] in open_spans:
            begun = open_spans.pop(ll.key[:-5])
            if ll.key == "eval_stop":
                eval_ms += ll.timestamp - begun.timestamp
                continue
            bmeta = begun.value.get("metadata") or {}
            number = _number(bmeta.get("first_epoch_num", bmeta.get("epoch_num")))
            count = _number(bmeta.get("epoch_count")) if ll.key == "block_stop" else 1.0
            spans[ll.key[:-5]].append(
                Epoch(number, count or 1.0, (begun.timestamp - t0) / 1000.0, (ll.timestamp - begun.timestamp) / 1000.0)
            )
    init = first.get("init_start")

    def value_of(key: str) -> Any:
        return first[key].value.get("value") if key in first else None

    return Result(
        path=path,
        benchmark=str(value_of("submission_benchmark") or ""),
        division=str(value_of("submission_division") or ""),
        org=str(value_of("submission_org") or ""),
        platform=str(value_of("submission_platform") or ""),
        status=str((stops[0].value.get("metadata") or {}).get("status") or ""),
        run_start_ms=t0,
        run_stop_ms=stops[0].timestamp,
        init_s=(t0 - init.timestamp) / 1000.0 if init is not None else None,
        global_batch=_int(value_of("global_batch_size")),
        local_batch=_int(value_of("local_batch_size") if "local_batch_size" in first else value_of("d_batch_size")),
        seed=_int(value_of("seed")),
        curve=tuple(curve),
        epochs=tuple(spans["epoch"] or spans["block"]),  # where a log brackets both, epochs are the finer
        eval_s=eval_ms / 1000.0,
        compliance=compliance,
        benchmark_line=first["submission_benchmark"].lineno if "submission_benchmark" in first else 0,
    )


def _number(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(value: Any) -> Optional[int]:
    number = _number(value)
    return int(number) if number is not None else None


def hardware(platform_desc: Dict[str, Any]) -> Tuple[str, str, int, str]:
    """What systems that differ only in their node count share: submitter, device, devices per node, host CPU."""
    return (
        platform_desc["submitter"],
        platform_desc["device"],
        platform_desc["devices_per_node"],
        platform_desc["host_cpu"],
    )
