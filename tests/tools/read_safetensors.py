"""An independent reader of kx checkpoints: the Python standard library and numpy only.

Reads a safetensors file, checks its layout and kx's data CRC32, and prints one line per tensor,
"name shape sum", then "meta key value" for every metadata entry used by the test.

    python3 read_safetensors.py FILE
"""
import json
import struct
import sys
import zlib

import numpy as np


def main(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    meta = header.pop("__metadata__", {})
    crc = format(zlib.crc32(data) & 0xFFFFFFFF, "08x")
    if crc != meta.get("kx_crc32_data"):
        raise SystemExit(f"data CRC {crc} != {meta.get('kx_crc32_data')}")
    end = 0
    for name, t in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        assert t["dtype"] == "F32", t
        begin, stop = t["data_offsets"]
        assert begin == end, "tensors must be contiguous"
        end = stop
        values = np.frombuffer(data[begin:stop], dtype="<f4").reshape(t["shape"])
        print(f"tensor {name} {'x'.join(map(str, t['shape']))} {values.astype(np.float64).sum():.9e}")
    assert end == len(data), "bytes after the last tensor"
    config = json.loads(meta["model_config"])
    print(f"meta layers {len(config['config']['layers'])}")
    for key in ("format", "optimizer_steps", "epoch", "step_in_epoch", "replicas"):
        print(f"meta {key} {meta[key]}")


if __name__ == "__main__":
    main(sys.argv[1])
