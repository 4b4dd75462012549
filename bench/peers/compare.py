"""kx against what its users would pick instead, on this machine, in one run: TensorFlow/Keras and
PyTorch from the bench venv (scripts/bench_venv.sh), each in its best documented CPU configuration,
on the same workloads, data, batch, optimiser and threads. Every measurement is a process of its own
(its peak resident memory is the kernel's figure for that process, taken by this harness alike for
all), and the rounds interleave kx and the peers so that a slow spell of the machine falls on all.

    compare.py --kx build/bench/bench_workload [--python VENV/bin/python] [--rounds 3] [--threads 2]
               [--workloads mlp:32,mlp:256,cnn:64,resnet50:16,mobilenetv2:32,efficientnetb0:32,lstm:64] [--peers keras:xla,keras:graph,torch:eager,torch:compile]

Prints the CPU, the versions, and for each workload a table of median ms/step, first step and peak
RSS, with each peer's ratio to kx.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = {"mlp": (200, 20), "cnn": (60, 10), "resnet50": (12, 4), "mobilenetv2": (12, 4), "efficientnetb0": (12, 4),
         "transformer": (20, 4), "lstm": (40, 5)}  # timed steps, warm-up steps


def cpu_description():
    model, flags = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "unknown CPU":
                    model = line.split(":", 1)[1].strip()
                elif line.startswith(("flags", "Features")) and not flags:
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    wanted = ["avx2", "fma", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16", "asimd", "bf16", "sve"]
    return model, [f for f in wanted if f in flags], os.cpu_count()


def run(cmd, env, limit_s):
    """Runs one measurement (ended after limit_s); returns its JSON record with the kernel's peak RSS of
    the process."""
    proc = subprocess.Popen(["timeout", str(limit_s)] + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    out, err = proc.stdout.read(), proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    lines = [l for l in out.splitlines() if l.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (err.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"exit {proc.returncode}: {tail[:160]}"}
    record = json.loads(lines[-1])
    record["process_peak_rss_mb"] = usage.ru_maxrss / 1024.0
    return record


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kx", required=True, help="path of bench_workload")
    p.add_argument("--python", default=sys.executable, help="the bench venv's python")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--workloads", default="mlp:32,mlp:256,cnn:64,resnet50:16,mobilenetv2:32,efficientnetb0:32,lstm:64,transformer:32")
    p.add_argument("--peers", default="keras:xla,keras:graph,torch:eager,torch:compile")
    p.add_argument("--limit", type=int, default=900, help="seconds one measurement may take")
    a = p.parse_args()
    workloads = [(w.split(":")[0], int(w.split(":")[1])) for w in a.workloads.split(",")]
    peers = [tuple(x.split(":")) for x in a.peers.split(",") if x]
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), TF_CPP_MIN_LOG_LEVEL="2", KERAS_BACKEND="tensorflow",
               OPENBLAS_NUM_THREADS="1")

    model, flags, cores = cpu_description()
    print(f"CPU: {model} ({cores} cores; {', '.join(flags) or 'no listed vector flags'}); {platform.platform()}")
    print(f"{a.threads} threads each; median of {a.rounds} rounds, each round runs every configuration once "
          "in turn; peak RSS is each process's own (getrusage of the child)")
    results = {}  # (workload, batch, name) -> list of records
    versions = {}
    for r in range(a.rounds):
        for workload, batch in workloads:
            steps, warmup = STEPS[workload]
            common = ["--workload", workload, "--batch", str(batch), "--steps", str(steps), "--warmup", str(warmup),
                      "--threads", str(a.threads)]
            configs = [("kx", [a.kx] + common)]
            for framework, config in peers:
                configs.append((f"{framework} {config}", [a.python, os.path.join(HERE, "peer_train.py"),
                                                          "--framework", framework, "--config", config] + common))
            for name, cmd in configs:
                rec = run(cmd, env, a.limit)
                results.setdefault((workload, batch, name), []).append(rec)
                if "version" in rec:
                    versions[name.split()[0]] = rec["version"]
                state = rec.get("error") or f"{rec['ms_per_step']:.3f} ms/step, {rec['process_peak_rss_mb']:.0f} MB"
                print(f"  round {r + 1}: {workload} b{batch} {name}: {state}", flush=True)
    print("versions: " + "; ".join(f"{k}: {v}" for k, v in sorted(versions.items())))

    for workload, batch in workloads:
        print(f"\n{workload} batch {batch}:")
        print(f"  {'':18} {'ms/step':>9} {'x kx':>6} {'first step ms':>14} {'peak RSS MB':>12} {'x kx':>6}")
        kx = results.get((workload, batch, "kx"), [])
        kx_ok = [x for x in kx if "error" not in x]
        kx_ms = statistics.median([x["ms_per_step"] for x in kx_ok]) if kx_ok else None
        kx_rss = statistics.median([x["process_peak_rss_mb"] for x in kx_ok]) if kx_ok else None
        for name in ["kx"] + [f"{f} {c}" for f, c in peers]:
            recs = [x for x in results.get((workload, batch, name), []) if "error" not in x]
            if not recs:
                errs = [x["error"] for x in results.get((workload, batch, name), [])]
                print(f"  {name:18} failed: {errs[0] if errs else 'not run'}")
                continue
            ms = statistics.median([x["ms_per_step"] for x in recs])
            first = statistics.median([x["first_step_ms"] for x in recs])
            rss = statistics.median([x["process_peak_rss_mb"] for x in recs])
            ratio = f"{ms / kx_ms:5.2f}x" if kx_ms else "   -"
            rss_ratio = f"{rss / kx_rss:5.2f}x" if kx_rss else "   -"
            print(f"  {name:18} {ms:9.3f} {ratio:>6} {first:14.1f} {rss:12.0f} {rss_ratio:>6}")


if __name__ == "__main__":
    main()
