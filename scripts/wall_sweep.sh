#!/usr/bin/env bash
# Time a shipped space's sweep as a user waits for it, on a GPU machine: the wall time of the whole
# `autotune sweep` command (search, re-measuring, finalists, the rehearsed start, the report), then what
# `status` says of it from another process.
#
#   scripts/wall_sweep.sh SPACE.yaml [autotune sweep ARGS...]
#
# From the repository root, with the wheels of ../shared/device/wheels.sh in .whl/ where the machine lacks
# optuna and mlflow. The sweep runs in /tmp/runs/<space name> and its folder is packed into $OUT/<space name>.tgz.
# Python's bytecode for torch is written first, untimed: a production image has it, and one without it pays about
# 5 s of compiling torch's modules in every process.
set -uo pipefail
space=$(realpath "$1")
shift
name=$(basename "$space" .yaml)
repo=$PWD
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
unset PYTHONDONTWRITEBYTECODE
export PYTHONPATH=/tmp/site:$repo PYTHONUNBUFFERED=1 COLUMNS=100
python3 -c "import torch, torch._dynamo, torch._inductor.compile_fx, triton, optuna, mlflow; print('torch', \
torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'triton', \
triton.__version__, 'optuna', optuna.__version__, 'mlflow', mlflow.__version__)" || exit 1
nvidia-smi --query-gpu=name,uuid,driver_version,memory.total,power.limit --format=csv,noheader
mkdir -p "/tmp/runs/$name" && cd "/tmp/runs/$name" || exit 1
began=$(date +%s.%N)
python3 -m autotune sweep "$space" "$@" 2>&1 | tee -a run.log
status=${PIPESTATUS[0]}
ended=$(date +%s.%N)
python3 -c "print(f'wall time of the sweep command: {$ended - $began:.1f} s (exit $status)')" | tee -a run.log
python3 -m autotune status --study "$name" | tee -a run.log
[ -n "${OUT:-}" ] && tar czf "$OUT/$name.tgz" --exclude='.autotune-cache' --exclude='profiles' . 2>/dev/null
exit "$status"
