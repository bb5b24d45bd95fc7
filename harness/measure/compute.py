"""How close to the machine's limit a cell ran: the host's measured compute peak per precision
and each cell's counted work, stored with a run (runs.limits_json).

Both are measured once and cached under the detbench cache folder: the peak per machine
fingerprint and thread count (`python -m harness.trainer.peak`, the matrix products and
convolutions the detectors run, each timed several times, the best kept), the work per
(model, input size, batch, model options) (`python -m harness.trainer.flops`, torch's FLOP
counter over the bundled model, which the parity tests show is the rivals' architecture).
In training the work is a model of the step: a fixed part per batch (backbone, FPN, RPN or
RetinaNet heads) and a part per unit of each logged work count (box head per sampled RoI,
mask head per mask RoI); the report multiplies it out with the counts each cell's own trials
logged (harness.measure.work.iteration_flops). Each framework's cell is counted with the
frozen stages its settings declare (the trainer's with its own `model.*` options). For
inference cells the work is the test-time forward of a synthetic batch, per image.

Both run as subprocesses of this Python, which needs the `trainer` extra; without it, or where
a count fails, the run stores why instead and its reports say so. The calibration workload
does no arithmetic: its cells get no figure.
"""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from harness import atomic, frameworks
from harness.vocab.sources import cache_root
from harness.plan import scenario

NO_WORK = ("calibrate",)  # frameworks whose cells do no arithmetic worth counting
CONFIGS = {
    "retinanet": "retina_r50v1_fpn_1x.py",
    "faster_rcnn": "faster_r50v1_fpn_1x.py",
    "mask_rcnn": "mask_r50v1_fpn_1x.py",
}
CONFIG_DIR = Path(__file__).resolve().parents[1] / "trainer" / "configs"
TIMEOUT_S = 900
PEAK_METHOD = 2  # harness.trainer.peak's METHOD: what a cached peak must have been measured by
JSON = Dict[str, Any]  # a JSON object a trainer module printed, or {"error": why}


def _cached(path: Path, compute: Callable[[], JSON], current: Callable[[JSON], bool] = lambda value: True) -> JSON:
    """The JSON object stored at `path` where current(it), else compute() stored there atomically
    (when it has no error)."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(value, dict) and current(value):
            return value
    except (OSError, ValueError):
        pass
    value = compute()
    if "error" not in value:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic.write_json(path, value, sort_keys=True)
        except OSError:
            pass  # an unwritable cache costs a recount next time, nothing else
    return value


def _module(args: List[str], env: Optional[Mapping[str, str]] = None) -> JSON:
    """The JSON object a harness.trainer module prints, or {"error": why}."""
    try:
        proc = subprocess.run(
            [sys.executable, "-m"] + args,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            env=dict(os.environ, **(env or {})),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": "%s: %s" % (args[0], exc)}
    if proc.returncode != 0:
        said = [line for line in proc.stderr.splitlines() if line.strip()]
        why = said[-1] if said else "exit code %d" % proc.returncode
        why = why[len("error: ") :] if why.startswith("error: ") else why
        if "No module named 'torch'" in proc.stderr:
            why = "torch is not installed here (pip install -e .[trainer])"
        return {"error": why[:300]}
    try:
        value = json.loads(proc.stdout.strip().splitlines()[-1])
        return value if isinstance(value, dict) else {"error": "%s printed no JSON object" % args[0]}
    except (ValueError, IndexError):
        return {"error": "%s printed no JSON" % args[0]}


def threads_of(env: Optional[Mapping[str, str]]) -> str:
    value = (env or {}).get("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS"))
    return str(value) if value else "default"


def peak_path(fingerprint: Optional[str], threads: Optional[str]) -> Path:
    return cache_root() / "limits" / ("peak-%s-t%s.json" % (fingerprint or "unknown", threads))


def peak(
    fingerprint: Optional[str],
    env: Optional[Mapping[str, str]] = None,
    refresh: bool = False,
    note: Callable[[str], None] = lambda line: None,
) -> JSON:
    """This host's measured peak (harness.trainer.peak's object) at the thread count `env` sets."""
    threads = threads_of(env)
    path = peak_path(fingerprint, threads)
    if refresh and path.exists():
        path.unlink()
    if not path.exists():
        note("measuring this host's peak at %s threads (once: then cached)" % threads)
    extra = {} if threads == "default" else {"OMP_NUM_THREADS": threads}
    # a figure cached by an older method (one timed call per shape) is measured again
    return _cached(
        path, lambda: _module(["harness.trainer.peak"], extra), current=lambda value: value.get("method") == PEAK_METHOD
    )


WORK_MODEL = 2  # cached work of version 1 was one figure per image, counted on a synthetic batch


def work_key(model: str, input_size: Sequence[int], batch: int, options: Mapping[str, Any], mode: str = "train") -> str:
    text = json.dumps([WORK_MODEL, model, list(input_size), batch, sorted(options.items()), mode], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def counted_work(
    model: str,
    input_size: Sequence[int],
    batch: int,
    options: Optional[Mapping[str, Any]] = None,
    mode: str = "train",
    note: Callable[[str], None] = lambda line: None,
) -> JSON:
    """harness.trainer.flops's object for `model` (bundled config plus its model.* `options`) at
    this input size and batch per device: in training the work model of one step ({"fixed_flops",
    "unit_flops", ...}), in inference {"flops_per_image"} of the test-time forward; or {"error": why}.
    `note` hears one line before a count that is not cached yet (it can take minutes)."""
    options = {k: v for k, v in (options or {}).items() if k.startswith("model.")}
    if model not in CONFIGS:
        return {"error": "no bundled %s to count" % model}
    path = cache_root() / "limits" / ("work-%s.json" % work_key(model, input_size, batch, options, mode))
    sets = [
        "data.input_size=%dx%d" % tuple(input_size),
        "data.images_per_device=%d" % batch,
        "data.source=synthetic",
        "train.device=cpu",
    ]
    sets += ["%s=%s" % (k, str(v).lower() if isinstance(v, bool) else v) for k, v in sorted(options.items())]
    args = ["harness.trainer.flops", str(CONFIG_DIR / CONFIGS[model]), "--mode", mode]
    for item in sets:
        args += ["--set", item]
    if not path.exists():
        note(
            "counting the work of %s %s at %dx%d, batch %d on the CPU (once: then cached)"
            % (model, mode, input_size[0], input_size[1], batch)
        )
    # the count does not depend on the thread count, so it takes every core
    return _cached(path, lambda: _module(args, {"OMP_NUM_THREADS": str(os.cpu_count() or 1)}))


# model.* options of the bundled trainer that change no counted work: levers that compute the same
# work another way (harness.trainer.flops.COUNTED_FORM), settings that change only the logged
# counts, the norms (no matrix work) and the starting weights. Cells that differ only in these
# share one count.
UNCOUNTED = (
    "model.roi_align",
    "model.mask_target_class_only",
    "model.sync_free",
    "model.sync_free_nms_passes",
    "model.fused_focal_loss",
    "model.retina_merge_first_convs",
    "model.rpn_pre_nms_top_n_train",
    "model.rpn_post_nms_top_n_train",
    "model.rpn_nms_thresh",
    "model.rpn_batch_per_image",
    "model.rpn_positive_fraction",
    "model.roi_batch_per_image",
    "model.roi_positive_fraction",
    "model.mask_max_rois_per_image",
    "model.roi_align_sampling_ratio",
    "model.roi_align_aligned",
    "model.anchor_corners",
    "model.norm",
    "model.weights",
    "model.backbone_weights",
)


def cell_options(sc: scenario.Scenario, cell: scenario.Cell) -> Dict[str, Any]:
    """The model.* settings a cell's work is counted with: the bundled trainer's own model.*
    options that change the work, and for every framework the frozen stages its settings
    declare (frozen stages compute no weight gradients); the rest is the bundled architecture,
    which the rivals' cells train too."""
    opts: Dict[str, Any] = {}
    if cell.framework == "detbench-trainer":
        opts = {
            k: v
            for k, v in sc.framework_options(cell.framework).items()
            if k.startswith("model.") and k not in UNCOUNTED
        }
    fw = frameworks.FRAMEWORKS.get(cell.framework)
    try:
        declared = fw.trial_settings(scenario.context(sc, cell)) if fw is not None else {}
    except Exception:  # an adapter that cannot say: the bundled model's own setting stands
        declared = {}
    frozen = declared.get("frozen_stages") if isinstance(declared, dict) else None
    if isinstance(frozen, int) and not isinstance(frozen, bool):
        opts["model.frozen_stages"] = min(max(frozen, 0), 4)  # -1 (nothing frozen) is the bundled 0
    return opts


def for_run(
    sc: scenario.Scenario,
    cells: Sequence[scenario.Cell],
    fingerprint: Optional[str],
    measure_peak: bool = True,
    note: Callable[[str], None] = lambda line: None,
) -> Optional[JSON]:
    """The limits a run stores: {"peak": ..., "work": {cell key: work model, or {"error"}}}, or
    None when no cell does arithmetic worth counting (calibration runs). `note` hears a line before
    each figure that is not cached yet."""
    counted = [c for c in cells if c.framework not in NO_WORK]
    if not counted:
        return None
    work: JSON = {}
    for cell in counted:
        opts = cell_options(sc, cell)
        if sc.inference:
            work[cell.key] = counted_work(cell.model, sc.input_size, cell.batch, opts, mode="inference", note=note)
        else:
            work[cell.key] = counted_work(cell.model, sc.input_size, sc.batch_per_gpu, opts, note=note)
    out: JSON = {"work": work}
    if measure_peak:
        out["peak"] = peak(fingerprint, sc.env, note=note)
        out["peak_of"] = {"fingerprint": fingerprint, "threads": threads_of(sc.env)}
    else:
        out["peak"] = {"error": "trials ran on other machines (the peak of the submitting host says nothing of them)"}
    return out


def unmeasured(bounds: Optional[Mapping[str, Any]]) -> List[str]:
    """One line for each compute figure a run could not get (its peak, a cell's work), said before
    its trials run: their reports show no share of peak for it, and nothing else changes."""
    bounds = bounds or {}
    lines: List[str] = []
    peak_value = bounds.get("peak") or {}
    if "error" in peak_value:
        lines.append("no compute peak for this run (no share of peak in its reports): %s" % peak_value["error"])
    for key, value in sorted((bounds.get("work") or {}).items()):
        if "error" in (value or {}):
            lines.append("no counted work for %s (no share of peak for it): %s" % (key, value["error"]))
    return lines


def _cached_peaks(fingerprint: str, threads: Optional[str], torch_threads: Optional[int]) -> List[JSON]:
    """The peaks cached here for this machine fingerprint that ran at the same thread count:
    the one cached under `threads` (the env's setting), and any other whose measurement ran
    torch at `torch_threads` threads (an unset OMP_NUM_THREADS is the core count)."""
    folder = cache_root() / "limits"
    try:
        names = sorted(p.name for p in folder.glob("peak-%s-t*.json" % fingerprint))
    except OSError:
        return []
    out: List[JSON] = []
    for name in names:
        try:
            value = json.loads((folder / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(value, dict):
            continue
        same_key = name == peak_path(fingerprint, threads).name
        if same_key or (torch_threads is not None and value.get("threads") == torch_threads):
            out.append(value)
    return out


def best_peak(bounds: Optional[JSON], fingerprint: Optional[str], threads: Optional[str]) -> Optional[JSON]:
    """A run's stored limits with each precision's peak raised to the best figure cached here for
    the same machine fingerprint and thread count, where that one is higher.

    A peak is a ceiling, and a measurement can only come out low (a busy machine), never high:
    the best figure measured for this kind of machine is the truer one. A raised precision keeps
    what the run stored as "stored_gflops". Measures nothing; a cache it cannot read changes nothing."""
    stored = (bounds or {}).get("peak")
    if not isinstance(stored, dict) or not isinstance(stored.get("precisions"), dict) or not fingerprint:
        return bounds
    cached = _cached_peaks(fingerprint, threads, stored.get("threads"))
    better: JSON = {}
    for precision, figures in stored["precisions"].items():
        mine = figures.get("peak_gflops") if isinstance(figures, dict) else None
        given = [((c.get("precisions") or {}).get(precision) or {}).get("peak_gflops") for c in cached]
        found: List[float] = [v for v in given if isinstance(v, (int, float))]
        theirs = max(found) if found else None
        if isinstance(mine, (int, float)) and theirs is not None and theirs > mine:
            better[precision] = dict(figures, peak_gflops=theirs, stored_gflops=mine)
    if not better:
        return bounds
    return dict(bounds or {}, peak=dict(stored, precisions=dict(stored["precisions"], **better)))
