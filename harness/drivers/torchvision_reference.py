"""torchvision's own training recipe, references/detection of the pinned release's tag, run unchanged.

torchvision ships no training loop in its package; its published recipe is the
references/detection folder of the pytorch/vision repository (train.py with engine.py,
utils.py, transforms.py, presets.py, coco_utils.py and group_by_aspect_ratio.py). Where a
source archive of the tag is given (`SOURCE_ENV`: a `git archive` of the tag or GitHub's
archive of it, which a networked machine fetches from `URL`), `detbench env build torchvision`
checks it (readable, version.txt of the pinned release, every script there) and keeps those
scripts byte for byte under the cache's sources/ with a manifest of their SHA-256 and the commit
the archive records (`install`). A trial then finds them there (`find`, each file's digest checked
again) and `run` executes train.py's own main(); detbench's additions enter only through
wrappers around the scripts' functions, each named in the settings line's training_code part:

- the command line: the scenario's batch, learning rate, workers, trainable layers and device as
  train.py's own options, and the data as the COCO layout coco_utils reads (links in the trial's
  working folder to the scenario's annotation file and image folder);
- torchvision.models.get_model (which train.py calls): the model built as train.py asks, plus the
  scenario's fixed input size as the transform's min/max size, the equal-work proposal and RoI
  counts and exact anchors the other frameworks use, the shared initial weights loaded, and the
  work counter's hooks (none changes a forward's result);
- utils.SmoothedValue: a window of 1, so the MetricLogger line gives each iteration's own time;
- engine.train_one_epoch (as train.py holds it): the epoch read, and the SETTINGS line printed
  before the first iteration;
- utils.MetricLogger.log_every: after each iteration the DETBENCH_WORK and DETBENCH_DATA lines;
  the process ends (exit 0) once the window's last iteration is logged, before another batch is
  fetched, as detbench ends every trial after its iterations;
- transforms.RandomHorizontalFlip: its forward runs as written; the wrapper records whether it
  called hflip, and the image id, under one extra target key the model does not read;
- evaluate (as train.py holds it): skipped, since the val pass train.py runs between epochs is
  not training and would otherwise be timed as part of the next epoch's first iteration.

Where the scripts cannot take a cell (synthetic data, the accuracy recipe's schedule and
checkpoints, a flip or shuffle switched off, ResNet-18, bf16 or any precision train.py cannot
run on the device), the replica runs instead and the settings line says why (`refusal`).
Standard library only at import: the harness reads the constants without torch.
"""
import hashlib
import json
import os
import shutil
import sys
import tarfile
import tempfile

TAG = "v0.29.1"          # the release of the pinned torchvision (frameworks/torchvision.py PINS)
VERSION = "0.29.1"       # what version.txt at the archive's top says at that tag
URL = "https://github.com/pytorch/vision/archive/refs/tags/%s.tar.gz" % TAG
SOURCE_ENV = "DETBENCH_TORCHVISION_SOURCE"
FOLDER = "references/detection"
FILES = ("train.py", "engine.py", "utils.py", "transforms.py", "presets.py", "coco_utils.py",
         "group_by_aspect_ratio.py")
MANIFEST = "MANIFEST.json"
VIEW = "detbench_view"   # the target key the flip wrapper adds: [image id, 1 if mirrored]


def cache_root():
    """detbench's cache folder, as harness.launch.envs finds it."""
    default = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                           "detbench")
    return os.environ.get("DETBENCH_CACHE") or default


def kept_at(root=None):
    """Where the scripts of TAG are kept: <cache>/sources/torchvision-<tag>/references/detection."""
    return os.path.join(root or cache_root(), "sources", "torchvision-%s" % TAG, *FOLDER.split("/"))


def _digest(data):
    return hashlib.sha256(data).hexdigest()


def install(archive, root=None):
    """Check a source archive of TAG and keep its references/detection scripts under the cache;
    the manifest written. ValueError, saying what is wrong, for an unreadable archive, another
    release's or one without every script."""
    try:
        with tarfile.open(archive) as tar:
            commit = (tar.pax_headers.get("comment") or "").strip() or None
            members = {m.name: m for m in tar.getmembers() if m.isfile()}
            tops = {name.split("/", 1)[0] for name in members if "/" in name}
            prefix = ""
            if "version.txt" not in members and len(tops) == 1:
                prefix = tops.pop() + "/"       # GitHub's archive: one folder named after the tag
            if prefix + "version.txt" not in members:
                raise ValueError("%s: no version.txt at its top: not a source archive of pytorch/vision" % archive)
            version = tar.extractfile(members[prefix + "version.txt"]).read().decode(errors="replace").strip()
            if version != VERSION:
                raise ValueError("%s: the archive is of torchvision %s, not the pinned %s (%s)"
                                 % (archive, version, VERSION, TAG))
            files = {}
            for name in FILES:
                member = members.get(prefix + FOLDER + "/" + name)
                if member is None:
                    raise ValueError("%s: no %s/%s in the archive" % (archive, FOLDER, name))
                files[name] = tar.extractfile(member).read()
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise ValueError("%s: not a readable tar archive (%s)" % (archive, exc)) from None
    target = kept_at(root)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    work = tempfile.mkdtemp(prefix=".detection-", dir=os.path.dirname(target))
    try:
        for name, data in files.items():
            with open(os.path.join(work, name), "wb") as fh:
                fh.write(data)
        with open(os.path.join(work, MANIFEST), "w") as fh:
            json.dump({"tag": TAG, "version": VERSION, "commit": commit, "archive": os.path.basename(str(archive)),
                       "files": {name: _digest(data) for name, data in files.items()}}, fh, indent=1, sort_keys=True)
        if os.path.isdir(target):
            shutil.rmtree(target)
        os.replace(work, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def find(root=None):
    """(folder, manifest) of the kept scripts when every one is there with its manifest's digest;
    None otherwise (the replica runs)."""
    folder = kept_at(root)
    try:
        with open(os.path.join(folder, MANIFEST)) as fh:
            manifest = json.load(fh)
        for name in FILES:
            with open(os.path.join(folder, name), "rb") as fh:
                if _digest(fh.read()) != manifest["files"][name]:
                    return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return folder, manifest


def refusal(args):
    """Why the reference scripts cannot train this cell as asked (the replica runs it, saying so);
    None where they can."""
    cuda = str(args.device).startswith("cuda")
    reasons = []
    if args.data == "synthetic":
        reasons.append("its scripts read COCO files only, the cell has synthetic data")
    if not args.flip:
        reasons.append("its scripts have no option to switch the flip off")
    if not args.shuffle:
        reasons.append("its scripts have no option to keep the file's order")
    if args.schedule != "reference" or args.lr_steps:
        reasons.append("its scripts step the rate by epochs, the cell sets a schedule of its own")
    if args.resume or args.checkpoint_every or args.clip_grad_norm:
        reasons.append("its scripts checkpoint per epoch and do not clip gradients")
    if args.depth != 50 or args.norm != "frozen_bn":
        reasons.append("its scripts build the model zoo's ResNet-50 FPN with frozen BN")
    if args.precision not in ("fp32", "fp16") or (args.precision == "fp16" and not cuda):
        reasons.append("its scripts' --amp is CUDA fp16, the cell is %s on %s" % (args.precision, args.device))
    if args.weight_decay != 1e-4 or args.retinanet_anchors != "exact" or args.anchor_corners != "exact":
        reasons.append("the cell changes an option its scripts do not take")
    return "; ".join(reasons) or None


def train_argv(args, data_path, model_name):
    """train.py's own command line for the cell."""
    argv = ["--data-path", data_path, "--dataset", "coco", "--model", model_name, "--device", str(args.device),
            "--batch-size", str(args.batch_size), "--workers", str(args.workers), "--lr", repr(args.lr),
            "--print-freq", "1", "--output-dir", "", "--trainable-backbone-layers", str(args.trainable_layers)]
    if args.precision == "fp16":
        argv.append("--amp")
    return argv


def coco_layout(args, into):
    """The folder coco_utils.get_coco reads, made of links to the scenario's files: annotations/
    instances_{train,val}2017.json and {train,val}2017/ (the val split is the train one: the
    trial ends before train.py evaluates)."""
    root = os.path.join(into, "coco")
    os.makedirs(os.path.join(root, "annotations"), exist_ok=True)
    for split in ("train2017", "val2017"):
        for link, target in ((os.path.join(root, split), os.path.abspath(args.images)),
                             (os.path.join(root, "annotations", "instances_%s.json" % split),
                              os.path.abspath(args.data))):
            if os.path.lexists(link):
                os.remove(link)
            os.symlink(target, link)
    return root


class _Trial:
    """What the wrappers share: the iterations done, the epoch, the counters."""

    def __init__(self, args, driver):
        self.args, self.driver = args, driver
        self.done = 0
        self.epoch = None
        self.work = None
        self.flips = 0
        self.settings_printed = False


def run(args, found):
    """Run train.py of the kept scripts for the cell, with detbench's wrappers; the exit code."""
    folder, manifest = found
    import torch
    import torchvision

    try:
        from harness.drivers import torchvision_driver as driver
    except ImportError:
        import torchvision_driver as driver
    sys.path.insert(0, folder)
    import engine  # noqa: F401  (the kept scripts, imported as train.py imports them)
    import train
    import transforms
    import utils
    for name in FILES:       # each module the run uses is the kept file, byte for byte
        module = sys.modules.get(name[:-3])
        if module is not None and os.path.dirname(os.path.abspath(module.__file__)) != os.path.abspath(folder):
            print("error: torchvision: %s was imported from %s, not the kept scripts" % (name, module.__file__),
                  file=sys.stderr, flush=True)
            return 2
    trial = _Trial(args, driver)
    height, width = (int(v) for v in args.input_size.lower().split("x"))
    recipe = ("torchvision's own references/detection at %s (commit %s), unchanged; detbench's additions "
              "through wrappers: train.py's options, the COCO layout as links, get_model (the fixed %dx%d input "
              "as min/max size, equal-work proposal and RoI counts, exact anchors, shared weights, work hooks), "
              "SmoothedValue window 1, train_one_epoch (epoch, settings line), log_every (WORK and DATA lines, "
              "the end after the window), RandomHorizontalFlip observed, evaluate between epochs skipped"
              % (manifest.get("tag"), (manifest.get("commit") or "not recorded")[:12], height, width))

    real_get_model = torchvision.models.get_model

    def get_model(name, **kwargs):
        kwargs.update(min_size=min(height, width), max_size=max(height, width))
        if args.model == "retinanet":
            kwargs["anchor_generator"] = driver.retinanet_anchors(args.retinanet_anchors, args.anchor_corners)
        else:
            kwargs.update(rpn_anchor_generator=driver.rpn_anchors(args.anchor_corners),
                          rpn_pre_nms_top_n_train=args.rpn_pre_nms_train,
                          rpn_post_nms_top_n_train=args.rpn_post_nms_train,
                          box_batch_size_per_image=args.roi_batch_per_image)
        if args.weights:
            kwargs["num_classes"] = driver.NUM_CLASSES      # the shared file's head (background first)
        model = real_get_model(name, **kwargs)
        if args.weights:
            driver.weights_map.load(model, args.weights, args.model, "torchvision")
        trial.work = driver.WorkCounter(model)
        return model
    torchvision.models.get_model = get_model

    real_init = utils.SmoothedValue.__init__

    def smoothed_init(self, window_size=1, fmt=None):
        real_init(self, window_size=1, fmt=fmt)
    utils.SmoothedValue.__init__ = smoothed_init

    real_flip = transforms.RandomHorizontalFlip.forward
    real_hflip = transforms.F.hflip

    def counting_hflip(*a, **k):
        trial.flips += 1
        return real_hflip(*a, **k)

    def flip_forward(self, image, target=None):
        before = trial.flips
        transforms.F.hflip = counting_hflip
        try:
            image, target = real_flip(self, image, target)
        finally:
            transforms.F.hflip = real_hflip
        if target is not None:
            image_id = int(torch.as_tensor(target["image_id"]).reshape(-1)[0])
            target[VIEW] = torch.tensor([image_id, int(trial.flips > before)])
        return image, target
    transforms.RandomHorizontalFlip.forward = flip_forward

    real_epoch = train.train_one_epoch

    def train_one_epoch(model, optimizer, data_loader, device, epoch, *rest, **kw):
        trial.epoch = epoch
        if not trial.settings_printed:
            trial.settings_printed = True
            data = {"batch": args.batch_size, "flip": True, "shuffle": True, "per_epoch": len(data_loader),
                    "synthetic": False, "recipe": recipe}
            amp = torch.float16 if args.precision == "fp16" else None
            print(driver.common.jsonlog.settings_line(*driver.as_run(
                args, model, optimizer, data_loader, amp, torch.device(args.device), data)), flush=True)
        return real_epoch(model, optimizer, data_loader, device, epoch, *rest, **kw)
    train.train_one_epoch = train_one_epoch

    def skipped_evaluate(*_args, **_kwargs):
        return None      # the val pass between epochs is not training: it would land in the next iteration's time
    train.evaluate = skipped_evaluate

    real_log_every = utils.MetricLogger.log_every

    def batches_until_done(iterable):
        for obj in iterable:
            if trial.done >= args.iterations:      # the window's last line is out: end before another batch
                sys.stdout.flush()
                os._exit(0)
            yield obj

    def log_every(self, iterable, print_freq, header=None):
        for images, targets in real_log_every(self, batches_until_done(iterable), print_freq, header):
            views = [t[VIEW].tolist() for t in targets]
            yield images, targets
            trial.done += 1
            if trial.work is not None:
                print(trial.work.line(trial.done), flush=True)
            print(driver.common.jsonlog.data_line(trial.done, trial.epoch, [(i, m) for i, m in views]), flush=True)
    utils.MetricLogger.log_every = log_every

    data_path = coco_layout(args, os.getcwd())
    parsed = train.get_args_parser().parse_args(train_argv(args, data_path, driver.MODELS[args.model]))
    train.main(parsed)
    return 0
