#!/usr/bin/env bash
# Start the MLflow tracking server that autotune sweeps log to (runs in the foreground; Ctrl-C stops it).
#
#   mlflow/start-server.sh                                # http://127.0.0.1:5000, store in the default dir
#   AUTOTUNE_MLFLOW_DIR=/data/mlflow mlflow/start-server.sh --workers 2   # extra args go to `mlflow server`
#
# Settings (environment):
#   AUTOTUNE_MLFLOW_DIR   where the run database (mlflow.db) and the artifacts (artifacts/) live;
#                         default ~/.local/share/autotune/mlflow, a fixed place, so a server restarted
#                         from any folder finds the same runs
#   AUTOTUNE_MLFLOW_HOST  interface to bind (default 127.0.0.1; 0.0.0.0 to serve other hosts, then
#                         also pass --allowed-hosts, see `mlflow server --help`)
#   AUTOTUNE_MLFLOW_PORT  port (default 5000)
#   MLFLOW_SERVER_ENABLE_JOB_EXECUTION  default false here (MLflow's is true): the job runner serves
#                         MLflow's GenAI features, which autotune does not use, and starts about seven
#                         background workers that compete for CPU with the trials on a GPU box
set -euo pipefail

dir="${AUTOTUNE_MLFLOW_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/autotune/mlflow}"
host="${AUTOTUNE_MLFLOW_HOST:-127.0.0.1}"
port="${AUTOTUNE_MLFLOW_PORT:-5000}"

if ! command -v mlflow >/dev/null 2>&1; then
    echo "start-server.sh: no 'mlflow' command on PATH; activate the environment where autotune is installed" >&2
    exit 1
fi
export MLFLOW_SERVER_ENABLE_JOB_EXECUTION="${MLFLOW_SERVER_ENABLE_JOB_EXECUTION:-false}"
mkdir -p "$dir/artifacts"
dir="$(cd "$dir" && pwd)"  # sqlite:/// needs an absolute path

client_host="$host"
if [[ "$host" == "0.0.0.0" || "$host" == "::" ]]; then
    client_host="$(hostname -f 2>/dev/null || hostname)"
fi
echo "MLflow store: $dir/mlflow.db, artifacts: $dir/artifacts" >&2
echo "Point autotune (and mlflow) at this server with:" >&2
echo "export MLFLOW_TRACKING_URI=http://$client_host:$port"

# Artifacts are proxied (--serve-artifacts, default root mlflow-artifacts:/): clients upload through
# the server, so workers on other hosts can log artifacts without access to this disk.
exec mlflow server \
    --backend-store-uri "sqlite:///$dir/mlflow.db" \
    --default-artifact-root mlflow-artifacts:/ \
    --artifacts-destination "$dir/artifacts" \
    --serve-artifacts \
    --host "$host" \
    --port "$port" \
    "$@"
