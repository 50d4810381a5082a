#!/usr/bin/env bash
# Run the commands that README.md and docs/ mark `# needs a GPU`, as written, on a GPU machine.
#
#   scripts/gpu_doc_commands.sh [PATTERN]
#
# From the repository root, with the wheels of ../shared/device/wheels.sh in .whl/ where the machine lacks
# optuna and mlflow (and pytest's, for the GPU tests). Each distinct command runs in its own scratch folder
# under /tmp/doc_commands, under `timeout -s INT $LIMIT_S` (default 150): a sweep with an overnight budget is
# stopped as Ctrl-C stops it, records its running trial as interrupted, and its `status` is printed after it.
# `pip install` lines are left out (GPU machines here have no package index). PATTERN (grep -E) picks a subset.
# Prints one summary line per command: its exit status and wall time; 130 is a sweep stopped at the limit.
set -uo pipefail
repo=$PWD
pattern=${1:-.}
limit=${LIMIT_S:-150}
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || exit 1
fi
export PYTHONPATH=/tmp/site:$repo PYTHONUNBUFFERED=1 COLUMNS=100
bin=/tmp/doc_commands/bin
mkdir -p "$bin"
printf '#!/bin/sh\nexec python3 -m autotune "$@"\n' > "$bin/autotune" && chmod +x "$bin/autotune"
export PATH=$bin:$PATH
python3 -c "import torch, triton, optuna, mlflow; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'triton', triton.__version__, 'optuna', optuna.__version__, 'mlflow', mlflow.__version__)"
nvidia-smi --query-gpu=name,uuid,driver_version,memory.total --format=csv,noheader
mapfile -t commands < <(grep -hE '^(autotune|pytest|python3?) .*# needs (a|[a-z]+) GPUs?' README.md docs/*.md docs/*/*.md 2>/dev/null \
    | sed -E 's/[[:space:]]*# needs (a|[a-z]+) GPUs?.*$//' | grep -E -- "$pattern" | awk '!seen[$0]++')
summary=()
for command in "${commands[@]}"; do
    folder=/tmp/doc_commands/$(printf %s "$command" | md5sum | cut -c1-8)
    mkdir -p "$folder"
    echo "=== $command"
    began=$(date +%s.%N)
    if [[ $command == pytest* ]]; then
        # python3 -m: an image's own pytest script may not match the pytest installed from .whl
        (cd "$repo" && timeout -s INT "$limit" bash -c "python3 -m $command") 2>&1 | tail -n 25
    else
        (cd "$folder" && ln -sfn "$repo/search_spaces" search_spaces && timeout -s INT "$limit" bash -c "$command") 2>&1 \
            | tail -n 25
    fi
    status=${PIPESTATUS[0]}
    wall=$(python3 -c "print(f'{$(date +%s.%N) - $began:.0f}')")
    if [[ $command == "autotune sweep"* ]] && ls "$folder"/*.db >/dev/null 2>&1; then
        (cd "$folder" && python3 -m autotune status 2>&1 | tail -n 8)  # the folder's one study
    fi
    summary+=("exit $status after ${wall} s: $command")
done
echo "=== summary (limit ${limit} s a command)"
printf '%s\n' "${summary[@]}"
