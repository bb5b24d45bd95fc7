"""Lines that share a training log with its records: warnings, evaluation output, crashes."""

WARNINGS = [
    "/opt/conda/lib/python3.8/site-packages/torch/functional.py:445: UserWarning: torch.meshgrid: in an upcoming "
    "release, it will be required to pass the indexing argument. (Triggered internally at "
    "../aten/src/ATen/native/TensorShape.cpp:2157.)\n"
    "  return _VF.meshgrid(tensors, **kwargs)  # type: ignore[attr-defined]",
    "/usr/local/lib/python3.7/site-packages/torch/optim/lr_scheduler.py:131: UserWarning: Detected call of "
    "`lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and later, you should call them in the "
    "opposite order.\n  warnings.warn(\"Detected call of `lr_scheduler.step()` before `optimizer.step()`. \"",
    "/usr/local/lib/python3.6/dist-packages/torch/nn/functional.py:2506: UserWarning: Default upsampling behavior "
    "when mode=bilinear is changed to align_corners=False since 0.4.0.\n  \"See the documentation of nn.Upsample "
    "for details.\".format(mode))",
    "[W reducer.cpp:1303] Warning: find_unused_parameters=True was specified in DDP constructor, but did not find "
    "any unused parameters in the forward pass. (function operator())",
    "NCCL INFO Bootstrap : Using eth0:10.0.2.15<0>",
    "NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation",
    "WARNING:root:Corrupt JPEG data: 2 extraneous bytes before marker 0xd9",
    "libpng warning: iCCP: known incorrect sRGB profile",
    "",
]

COCO_SUMMARY = [
    " Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = {:.3f}",
    " Average Precision  (AP) @[ IoU=0.50      | area=   all | maxDets=100 ] = {:.3f}",
    " Average Precision  (AP) @[ IoU=0.75      | area=   all | maxDets=100 ] = {:.3f}",
    " Average Precision  (AP) @[ IoU=0.50:0.95 | area= small | maxDets=100 ] = {:.3f}",
    " Average Precision  (AP) @[ IoU=0.50:0.95 | area=medium | maxDets=100 ] = {:.3f}",
    " Average Precision  (AP) @[ IoU=0.50:0.95 | area= large | maxDets=100 ] = {:.3f}",
    " Average Recall     (AR) @[ IoU=0.50:0.95 | area=   all | maxDets=  1 ] = {:.3f}",
    " Average Recall     (AR) @[ IoU=0.50:0.95 | area=   all | maxDets= 10 ] = {:.3f}",
    " Average Recall     (AR) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = {:.3f}",
    " Average Recall     (AR) @[ IoU=0.50:0.95 | area= small | maxDets=100 ] = {:.3f}",
    " Average Recall     (AR) @[ IoU=0.50:0.95 | area=medium | maxDets=100 ] = {:.3f}",
    " Average Recall     (AR) @[ IoU=0.50:0.95 | area= large | maxDets=100 ] = {:.3f}",
]


def coco_eval(rnd, kinds=("bbox",)):
    """pycocotools' evaluation output."""
    out = ["Loading and preparing results...", "DONE (t=%.2fs)" % rnd.uniform(0.1, 3), "creating index...",
           "index created!"]
    for kind in kinds:
        out += ["Running per image evaluation...", "Evaluate annotation type *%s*" % kind,
                "DONE (t=%.2fs)." % rnd.uniform(5, 60), "Accumulating evaluation results...",
                "DONE (t=%.2fs)." % rnd.uniform(1, 10)]
        ap = rnd.uniform(0.0, 0.45)
        out += [line.format(max(0.0, ap * rnd.uniform(0.5, 1.6))) for line in COCO_SUMMARY]
    return "\n".join(out)


def warning(rnd):
    return rnd.choice(WARNINGS)


def maybe_noise(rnd, percent):
    """A warning line (or two) now and then, else None."""
    if rnd.random() * 100 < percent:
        return warning(rnd)
    return None


def traceback(rnd, script):
    """The end of a run killed by an exception."""
    why = rnd.choice([
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; "
        "14.21 GiB already allocated; 4.75 MiB free; 14.53 GiB reserved in total by PyTorch)",
        "RuntimeError: NCCL communicator was aborted on rank 0.",
        "OSError: [Errno 28] No space left on device",
        "KeyboardInterrupt",
    ])
    return ("Traceback (most recent call last):\n  File \"%s\", line 187, in <module>\n    main()\n"
            "  File \"%s\", line 176, in main\n    trainer.train()\n%s" % (script, script, why))
