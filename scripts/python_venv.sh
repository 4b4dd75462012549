#!/usr/bin/env bash
# Makes one of kx's pinned Python environments, from the package index pip is configured for. Safe to
# run again: an environment with these versions is reused. libkx and its C users never need them.
#
#   python_venv.sh keras [dir]   the real Keras 3 (TensorFlow CPU backend) and h5py that the Keras-file
#                                tests compare with (default build/keras-venv; ctest's python_keras_files
#                                looks there)
#   python_venv.sh bench [dir]   the peers of scripts/run_bench.sh: TensorFlow/Keras, PyTorch and
#                                onnxruntime (default build/bench-venv)
set -euo pipefail
cd "$(dirname "$0")/.."
purpose=${1:?usage: python_venv.sh keras|bench [dir]}
case "$purpose" in
  keras) pins=(keras==3.15.1 tensorflow-cpu==2.21.0 h5py==3.14.0 numpy==2.4.6) ;;
  bench) pins=(keras==3.15.1 tensorflow-cpu==2.21.0 torch==2.15.0 onnxruntime==1.32.0 numpy==2.4.6) ;;
  *) echo "python_venv.sh: unknown environment '$purpose' (keras, bench)" >&2; exit 2 ;;
esac
dir=${2:-build/$purpose-venv}
stamp="$dir/.kx-pins"
if [[ -x "$dir/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "${pins[*]}" ]]; then
  exit 0
fi
/usr/bin/python3 -m venv "$dir"
"$dir/bin/python" -m pip install --quiet --disable-pip-version-check "${pins[@]}"
echo "${pins[*]}" > "$stamp"
