"""NVIDIA DeepLearningExamples EfficientDet-D0 for TensorFlow 2, through its train.py.

Follows upstream's scripts/D0/training-benchmark-*.sh: mpirun one process per GPU over
``train.py --model_name=efficientdet-d0 --use_xla=True --amp=... --benchmark=True
--benchmark_steps=N`` with the 22.03-tf2 NGC container. detbench sets --batch_size and
--benchmark_steps (warmup + measured) and --log_steps 1; synthetic data uses
--use_fake_data. dllogger's time_log gives images/s over step windows (THROUGHPUT).
"""
from harness.frameworks.base import CONTAINER_ONLY, Framework, ImageRecipe
from harness.frameworks import initial
from harness.frameworks import settings as normalized

COMMIT = "bd6ca13b59b539fee7394d2887fdff2b1444d49a"
PINS = {"DeepLearningExamples": COMMIT, "base image": "nvcr.io/nvidia/tensorflow:22.03-tf2-py3"}
WORKDIR = "/workspace/effdet-tf2"


def command(ctx):
    initial.options(ctx, ())      # it takes no scenario options
    world = ctx.gpus * ctx.nodes
    train = ["python3", WORKDIR + "/train.py", "--model_name=efficientdet-d0",
             "--model_dir=/tmp/detbench-effdet-tf2", "--batch_size=%d" % ctx.batch_per_gpu,
             "--num_epochs=1", "--use_xla=True", "--amp=%s" % (ctx.precision == "fp16"),
             "--benchmark=True", "--benchmark_steps=%d" % ctx.iterations, "--log_steps=1",
             "--seed=%d" % ctx.seed]
    if ctx.data:
        train += ["--training_file_pattern=%s" % ctx.data["annotations"]]
    else:
        train += ["--use_fake_data=True"]
    if world == 1:
        return train + list(ctx.extra_args)
    return ["mpirun", "-np", str(world), "--allow-run-as-root", "--bind-to", "none", "-map-by", "slot",
            "-x", "LD_LIBRARY_PATH", "-x", "PATH"] + train + list(ctx.extra_args)


def settings(ctx):
    # train.py's --backbone_init and --pretrained_ckpt default to None: random weights, nothing fetched
    return dict(normalized.common(ctx, frozen_stages=-1, norm="bn", loader_workers=0, flip=True,
                                  init=initial.init(ctx)),
                input_size=[512, 512])


FRAMEWORK = Framework(
    name="nvidia-efficientdet-tf2", title="NVIDIA EfficientDet (TF2)", scraper="dllogger",
    models=frozenset({"efficientdet_d0"}), precisions=frozenset({"fp32", "tf32", "fp16"}),
    status=CONTAINER_ONLY,
    why="needs the NGC TensorFlow 22.03 container and a GPU (XLA, Horovod): dockerfiles/nvidia-efficientdet-tf2",
    figures="images/s over dllogger step windows (THROUGHPUT), from the start of each window",
    command=command, settings=settings, pins=PINS,
    images=(ImageRecipe("nvidia-efficientdet-tf2", "python3"),)
)
