#!/usr/bin/env bash
# Makes the pinned Python environment the Keras-file tests run against (issue 32): the real Keras 3
# with TensorFlow (CPU) and h5py, from the package index pip is configured for. Safe to run again: an
# environment with these versions is reused.
#
#   keras_venv.sh [dir]     (default build/keras-venv; ctest's python_keras_files looks there)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build/keras-venv}
pins=(keras==3.15.1 tensorflow-cpu==2.21.0 h5py==3.14.0 numpy==2.4.6)
stamp="$dir/.kx-pins"
if [[ -x "$dir/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "${pins[*]}" ]]; then
  exit 0
fi
/usr/bin/python3 -m venv "$dir"
"$dir/bin/python" -m pip install --quiet --disable-pip-version-check "${pins[@]}"
echo "${pins[*]}" > "$stamp"
