#!/bin/sh
# The MobileNetV2 fine-tuning sample (samples/c/mobilenet_finetune.c) on image folders this script
# writes (tests/tools/write_image_folder.py: red and blue squares on grey noise).
#
#   run_mobilenet_finetune.sh <sample> <work_dir> [keras_python]
#
# Without keras_python: one epoch from scratch (the sample runs end to end). With it: the base's
# weights saved by the real Keras 3 (MobileNetV2 without its top, weights=None), loaded by name, the
# frozen base's head trained, then the base fine-tuned; the caller checks the printed lines. Random
# weights with fresh moving statistics give features of about 1e-11 (in Keras as in kx): the base's
# BatchNormalization statistics are first set from one batch of noise (momentum 0, one call in
# training mode), as a trained base has them.
set -eu
sample=$1 work=$2 python=${3:-}
here=$(dirname "$0")
rm -rf "$work" && mkdir -p "$work"
/usr/bin/python3 "$here/write_image_folder.py" "$work/train" 48 1
/usr/bin/python3 "$here/write_image_folder.py" "$work/validation" 16 2
if [ -z "$python" ]; then
  exec "$sample" "$work/train" "$work/validation" 1
fi
[ -x "$python" ] || { echo "no Keras environment: run scripts/python_venv.sh keras"; exit 77; }
KERAS_BACKEND=tensorflow TF_CPP_MIN_LOG_LEVEL=3 "$python" - "$work/base.weights.h5" <<'PY'
import sys
import keras
keras.utils.set_random_seed(3)
import numpy as np
base = keras.applications.MobileNetV2(weights=None, include_top=False, pooling="avg", input_shape=(96, 96, 3))
for layer in base.layers:
    if isinstance(layer, keras.layers.BatchNormalization):
        layer.momentum = 0.0
base(np.random.default_rng(0).random((32, 96, 96, 3), dtype=np.float32), training=True)
base.save_weights(sys.argv[1])
print("keras base weight tensors:", len(base.weights))
PY
exec "$sample" "$work/train" "$work/validation" 2 "$work/base.weights.h5" "$work/checkpoints"
