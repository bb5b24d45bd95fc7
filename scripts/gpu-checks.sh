#!/usr/bin/env bash
# The checks only a CUDA host can run, in one go, each stage under its own time limit:
#   tests   the suite's CUDA cases: every model x CUDA precision x lever for two iterations,
#           the captured step (train.cuda_graph), RoIAlign on the GPU, the GPU peak;
#   run     scenarios/gpu-throughput.yaml shortened (10 + 30 iterations, 2 repeats) and its report;
#   graph   Mask R-CNN R50-FPN at 800x1333, batch 8, sync-free, 12 iterations: the captured step in
#           fp16, bf16 and fp32 beside the uncaptured fp16 step, each iteration's losses;
#   profile where a step's time goes (python -m harness.trainer.profile), the trainer and torchvision
#           side by side, RetinaNet and Mask R-CNN at 800x1333, batch 8, fp16, sync-free;
#   bench   benchmarks/trainer_vs_torchvision.py on the GPU at 800x1333, fp32 and fp16.
# Usage: scripts/gpu-checks.sh OUT_DIR [STAGE...]   (default stages: tests run bench)
# DETBENCH_GPU_TEST_WORKERS=N runs the tests stage in N pytest-xdist processes where it is installed;
# DETBENCH_GPU_TESTS_LIMIT=S ends that stage after S seconds (default 900; with 4 workers on an H200 the
# 170 cases take about 6.5 minutes; each worker then gets its share of the cores through
# OMP_NUM_THREADS). Each test's outcome is logged as it ends, and the stage is ended
# with SIGINT, on which pytest still prints each failure's reason and the summary.
# Each stage's whole log goes to OUT_DIR; where pytest-timeout is installed each test ends at 120 s.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu-checks.sh OUT_DIR [STAGE...]}
shift
stages=${*:-tests run bench}
mkdir -p "$out"
python=${DETBENCH_GPU_PYTHON:-python3}
"$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else "no CUDA device visible to torch")' || exit 2
"$python" -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__, torch.cuda.get_device_name())' \
    | tee "$out/env.txt"
per_test=()   # with pytest-timeout, a stuck test ends and the summary of failures is still written
"$python" -c 'import pytest_timeout' 2>/dev/null && per_test=(--timeout 120)
workers=${DETBENCH_GPU_TEST_WORKERS:-0}
if [ "$workers" -gt 0 ] && "$python" -c 'import xdist' 2>/dev/null; then
    per_test+=(-n "$workers")
    # each worker's torch would take every core: the CPU cases then starve each other past their limit
    export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( $(nproc) / workers > 0 ? $(nproc) / workers : 1 ))}
fi
status=0
for stage in $stages; do
    case $stage in
    tests)
        timeout -s INT -k 60 "${DETBENCH_GPU_TESTS_LIMIT:-900}" "$python" -m pytest -v -p no:cacheprovider -rfE --tb=short "${per_test[@]}" \
            tests/trainer/test_capability_matrix.py tests/trainer/test_cuda_graph.py tests/trainer/test_levers.py \
            tests/trainer/test_infer.py tests/measure/test_compute.py --junitxml="$out/tests.xml" > "$out/tests.log" 2>&1
        rc=$?; echo "tests: exit $rc ($out/tests.log)"; tail -n 30 "$out/tests.log" ;;
    run)
        sed -e 's/^warmup: .*/warmup: 10/' -e 's/^measure: .*/measure: 30/' -e 's/^repeats: .*/repeats: 2/' \
            -e 's/^timeout_s: .*/timeout_s: 300/' scenarios/gpu-throughput.yaml > "$out/gpu-throughput-short.yaml"
        timeout 1200 "$python" -m harness.cli run --scenario "$out/gpu-throughput-short.yaml" --results "$out/results" \
            > "$out/run.log" 2>&1
        rc=$?; echo "run: exit $rc ($out/run.log)"; tail -n 20 "$out/run.log"
        "$python" -m harness.cli report --results "$out/results" --platform local > "$out/report.md" 2>&1 ;;
    graph)
        rc=0
        for variant in "fp16 true" "fp16 false" "bf16 true" "fp32 true"; do
            set -- $variant
            echo "== mask_rcnn precision $1 cuda_graph $2" >> "$out/graph.log"
            timeout 300 "$python" -m harness.trainer.train harness/trainer/configs/mask_r50v1_fpn_1x.py \
                --set train.device=cuda --set train.precision="$1" --set train.cuda_graph="$2" \
                --set model.sync_free=true --set data.source=synthetic --set data.images_per_device=8 \
                --set data.input_size=800x1333 --set train.max_iter=12 --set train.schedule=constant \
                2>&1 | grep -v '^DETBENCH_WORK\|^DETBENCH_SETTINGS\|^DETBENCH_META' >> "$out/graph.log"
            [ "${PIPESTATUS[0]}" = 0 ] || rc=1
        done
        grep -h '^==\|^iter\|error' "$out/graph.log" ;;
    profile)
        rc=0
        for config in retina_r50v1_fpn_1x mask_r50v1_fpn_1x; do
            timeout 300 "$python" -m harness.trainer.profile "harness/trainer/configs/$config.py" --set train.device=cuda \
                --set train.precision=fp16 --set model.sync_free=true --set data.images_per_device=8 \
                --set data.input_size=800x1333 --steps 5 --warmup 3 > "$out/profile-$config.log" 2>&1 || rc=1
            echo "== $config"; cat "$out/profile-$config.log"
        done ;;
    bench)
        rc=0
        for precision in fp32 fp16; do
            timeout 600 "$python" benchmarks/trainer_vs_torchvision.py --device cuda --size 800x1333 --batch 2 \
                --precision "$precision" --rounds 5 --iters 3 > "$out/bench-$precision.log" 2>&1 || rc=$?
            grep -v "^  both\|differs" "$out/bench-$precision.log"
        done ;;
    *)
        echo "unknown stage $stage (tests, run, graph, profile, bench)" >&2; exit 2 ;;
    esac
    [ "$rc" = 0 ] || status=1
done
exit $status
