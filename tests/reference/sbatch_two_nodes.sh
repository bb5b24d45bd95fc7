#!/bin/bash
#SBATCH --job-name=detbench-20260101-000000-abcdef-0002
#SBATCH --comment=detbench:20260101-000000-abcdef-0002:detbench-trainer:faster_rcnn:fp16:local:8:2
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=32
#SBATCH --time=25
#SBATCH --partition=gpu
#SBATCH --account=detection
#SBATCH --output=/shared/results/trials/20260101-000000-abcdef-0002/runner.err
#SBATCH --open-mode=append
#SBATCH --exclusive
#SBATCH --constraint=a100&ib
# detbench trial 20260101-000000-abcdef-0002: cell detbench-trainer/faster_rcnn/fp16/local/8/2
set -euo pipefail
cd <ROOT>
export PYTHONPATH=<ROOT>"${PYTHONPATH:+:$PYTHONPATH}"
export NCCL_DEBUG=WARN
# rendezvous: torchrun on every node meets on the first host of the allocation
MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)
export MASTER_ADDR
export MASTER_PORT=$((20000 + SLURM_JOB_ID % 10000))
export PET_MASTER_ADDR="$MASTER_ADDR"
export PET_MASTER_PORT="$MASTER_PORT"
srun --nodes=2 --ntasks-per-node=1 --kill-on-bad-exit=1 \
    bash -c 'rank="${SLURM_NODEID:-0}"; dir="$1"; shift; if [ "$rank" != 0 ]; then dir="$dir/node-$rank"; fi; export PET_NODE_RANK="$rank"; py="$1"; runner="$2"; shift 2; exec "$py" "$runner" --trial-dir "$dir" "$@"' detbench-node /shared/results/trials/20260101-000000-abcdef-0002 \
    <PYTHON> <ROOT>/runner.py --timeout 1200 --env-key NCCL_DEBUG \
    -- <PYTHON> -m torch.distributed.run --nproc_per_node 8 --nnodes 2 --rdzv-backend static -m harness.trainer.train <ROOT>/harness/trainer/configs/faster_r50v1_fpn_1x.py --set train.max_iter=60 --set train.precision=fp16 --set train.seed=0 --set data.images_per_device=2 --set data.input_size=800x1333 --set data.source=synthetic --set train.schedule=constant --set train.decay_norm_bias=true
