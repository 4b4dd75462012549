"""Writes an image folder for the image-folder samples and tests (Keras's image_dataset_from_directory
layout: one subfolder per class of .png files), with the Python standard library alone.

    write_image_folder.py <dir> <images_per_class> [seed]

Two classes, "red" and "blue": each image is grey noise with a square of its class's colour at a
random place, so a classifier must find colour, not position.
"""
import os
import random
import struct
import sys
import zlib

SIDE = 64


def png(path, pixels):
    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + bytes(pixels[r * SIDE * 3:(r + 1) * SIDE * 3]) for r in range(SIDE))
    header = struct.pack(">IIBBBBB", SIDE, SIDE, 8, 2, 0, 0, 0)  # 8-bit RGB
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) +
                chunk(b"IEND", b""))


def main():
    out, per_class = sys.argv[1], int(sys.argv[2])
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    colours = {"blue": (30, 60, 230), "red": (230, 40, 30)}
    for name, colour in colours.items():
        os.makedirs(os.path.join(out, name), exist_ok=True)
        for i in range(per_class):
            pixels = []
            for _ in range(SIDE * SIDE):
                g = rng.randrange(40, 160)
                pixels += [g, g, g]
            size = rng.randrange(16, 32)
            top, left = rng.randrange(0, SIDE - size), rng.randrange(0, SIDE - size)
            for r in range(top, top + size):
                for c in range(left, left + size):
                    pixels[(r * SIDE + c) * 3:(r * SIDE + c) * 3 + 3] = colour
            png(os.path.join(out, name, f"{i:03d}.png"), pixels)


if __name__ == "__main__":
    main()
