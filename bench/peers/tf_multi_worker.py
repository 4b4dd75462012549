"""TensorFlow's MultiWorkerMirroredStrategy as the peer of bench_multi_worker: the MLP at a global batch
of 256, 1 process x 2 threads against 2 worker processes x 1 thread started with TF_CONFIG on loopback,
as kx's TF_CONFIG workers are. Prints "tf MODE ms_per_step=X" per mode, median of the rounds.

    tf_multi_worker.py [--steps 100] [--rounds 3]
    tf_multi_worker.py --worker INDEX --port0 P --steps N   (one worker; started by the above)
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

GLOBAL_BATCH = 256


def train(threads, steps, strategy_kind):
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    strategy = (tf.distribute.MultiWorkerMirroredStrategy() if strategy_kind == "multi"
                else tf.distribute.get_strategy())
    import keras
    from keras import layers

    # A custom loop over strategy.run: Keras 3.15's fit refuses the per-replica batches of a
    # MultiWorkerMirroredStrategy ("Attempt to convert a value (PerReplica...)"), so the step is
    # written as tf.distribute's guide writes it, with Keras's layers and Adam.
    with strategy.scope():
        model = keras.Sequential([keras.Input((784,)), layers.Dense(256, activation="relu"),
                                  layers.Dense(256, activation="relu"), layers.Dense(10, activation="softmax")])
        optimizer = keras.optimizers.Adam(1e-3, epsilon=1e-7)
        optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(reduction="none")
    rng = np.random.default_rng(7)
    x = rng.random((32 * GLOBAL_BATCH, 784), dtype=np.float32)
    y = rng.integers(0, 10, size=32 * GLOBAL_BATCH).astype(np.int64)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH, drop_remainder=True).repeat()
    it = iter(strategy.experimental_distribute_dataset(ds))

    def replica_step(xb, yb):
        with tf.GradientTape() as tape:
            probs = model(xb, training=True)
            loss = tf.nn.compute_average_loss(loss_fn(yb, probs), global_batch_size=GLOBAL_BATCH)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    @tf.function
    def step():
        xb, yb = next(it)
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(replica_step, args=(xb, yb)), axis=None)

    for _ in range(20):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    float(loss)
    return (time.perf_counter() - t0) * 1e3 / steps


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def two_workers(steps):
    ports = [free_port(), free_port()]
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    procs = []
    for i in range(2):
        env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}}),
                   TF_CPP_MIN_LOG_LEVEL="2", OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, __file__, "--worker", str(i), "--steps", str(steps)],
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True))
    outs = [p.communicate(timeout=900)[0] for p in procs]
    for line in outs[0].splitlines():
        if line.startswith("ms_per_step="):
            return float(line.split("=", 1)[1])
    raise RuntimeError("the chief printed no time")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--worker", type=int)
    a = p.parse_args()
    if a.worker is not None:
        print(f"ms_per_step={train(1, a.steps, 'multi')}", flush=True)
        return
    single, multi = [], []
    for _ in range(a.rounds):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", OMP_NUM_THREADS="2")
        out = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); "
                              f"import tf_multi_worker as t; print('ms_per_step=%f' % t.train(2, {a.steps}, 'one'))"],
                             capture_output=True, text=True, env=env, timeout=900).stdout
        single.append(float([l for l in out.splitlines() if l.startswith("ms_per_step=")][0].split("=")[1]))
        multi.append(two_workers(a.steps))
    s, m = statistics.median(single), statistics.median(multi)
    print(f"tf MLP batch {GLOBAL_BATCH}: 1 process x 2 threads {s:.3f} ms/step; 2 workers x 1 thread "
          f"(MultiWorkerMirroredStrategy, TF_CONFIG) {m:.3f} ms/step ({100 * (m / s - 1):+.1f} %)")


if __name__ == "__main__":
    main()
