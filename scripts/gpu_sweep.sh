#!/usr/bin/env bash
# Run one autotune command on a remote GPU machine and bring its study back.
#
#   scripts/gpu_sweep.sh NAME [autotune ARGS...]
#
# From the repository root on the GPU machine, with the wheels of ../shared/device/wheels.sh in .whl/
# (carried by the call): installs them into /tmp/site, runs `python3 -m autotune ARGS` in the folder
# /tmp/runs/NAME (kept between calls on a warm machine, so a sweep there resumes), prints the software
# versions and nvidia-smi's view of the GPU, and packs the folder's study, MLflow store and report into
# $OUT/NAME.tgz. A folder .gpu_state/NAME.tgz carried by the call is unpacked first: a sweep resumes
# from a study brought back by an earlier call, on a fresh machine too. LIMIT_S=N sends the command
# SIGINT after N seconds (it records its running trial as interrupted and says how to resume), so the
# study is packed before the call's own limit.
set -uo pipefail
name=$1
shift
repo=$PWD
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || exit 1
fi
export PYTHONPATH=/tmp/site:$repo PYTHONUNBUFFERED=1
mkdir -p "/tmp/runs/$name"
cd "/tmp/runs/$name" || exit 1
if [ -f "$repo/.gpu_state/$name.tgz" ] && [ ! -f autotune.db ]; then
    tar xzf "$repo/.gpu_state/$name.tgz"
fi
python3 -c "import torch, triton, optuna, mlflow; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'cudnn', torch.backends.cudnn.version(), 'triton', triton.__version__, 'optuna', optuna.__version__, \
'mlflow', mlflow.__version__)"
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv,noheader
limit=()
[ -n "${LIMIT_S:-}" ] && limit=(timeout -s INT "$LIMIT_S")
"${limit[@]}" python3 -m autotune "$@" 2>&1 | tee -a run.log
status=${PIPESTATUS[0]}
if [ -n "${OUT:-}" ]; then
    tar czf "$OUT/$name.tgz" --exclude='.autotune-cache' --exclude='profiles' . 2>/dev/null
fi
exit "$status"
