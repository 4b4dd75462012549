"""The Python binding's data loaders: numpy arrays of every dtype kx reads, .npy and CSV files, image
folders (PNG files written here with zlib), cache, prefetch and augmentation."""
import os
import struct
import tempfile
import unittest
import zlib

import numpy as np

import kx


def write_png(path, pixels):
    """A PNG of uint8 pixels (height, width) gray or (height, width, 3) RGB, written with zlib."""
    pixels = np.asarray(pixels, np.uint8)
    color = 0 if pixels.ndim == 2 else 2
    h, w = pixels.shape[:2]
    raw = b"".join(b"\x00" + pixels[r].tobytes() for r in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, color, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def model(input_shape, classes=2):
    m = kx.Sequential(kx.Strategy.mirrored(["cpu"]), input_shape=input_shape)
    m.add_flatten().add_dense(classes, "softmax")
    m.compile(optimizer="adam", metrics=["accuracy"], seed=4)
    return m


class Arrays(unittest.TestCase):
    def test_every_dtype_reads_as_its_float32_values(self):
        rng = np.random.default_rng(1)
        base = rng.integers(0, 200, (20, 3))
        y = rng.integers(0, 2, 20)
        want = kx.Dataset.from_arrays(base.astype(np.float32), y).feature_moments(3)
        for dtype in (np.float64, np.int32, np.int64):
            got = kx.Dataset.from_arrays(base.astype(dtype), y.astype(dtype)).feature_moments(3)
            self.assertEqual(got, want, dtype)
        u8 = kx.Dataset.from_arrays(base.astype(np.uint8), y).feature_moments(3)
        np.testing.assert_allclose(u8[0], np.array(want[0]) / 255, rtol=1e-6)

    def test_npy_and_csv_files_load_equal_to_the_arrays(self):
        rng = np.random.default_rng(2)
        x = rng.standard_normal((30, 4))
        y = rng.integers(0, 3, 30)
        with tempfile.TemporaryDirectory() as d:
            np.save(os.path.join(d, "x.npy"), x)
            np.save(os.path.join(d, "y.npy"), y)
            with open(os.path.join(d, "t.csv"), "w") as f:
                f.write("a,b,label,c,d\n")
                for r in range(30):
                    f.write(",".join([repr(x[r, 0]), repr(x[r, 1]), str(y[r]), repr(x[r, 2]), repr(x[r, 3])]) + "\n")
            want = kx.Dataset.from_arrays(x.astype(np.float32), y).feature_moments(4)
            self.assertEqual(kx.Dataset.from_npy(os.path.join(d, "x.npy"), os.path.join(d, "y.npy")).feature_moments(4), want)
            csv = kx.Dataset.from_csv(os.path.join(d, "t.csv"), "label")
            self.assertEqual(len(csv), 30)
            self.assertEqual(csv.feature_moments(4), want)
            with open(os.path.join(d, "bad.csv"), "w") as f:
                f.write("a,label\n1,0\nx,1\n")
            with self.assertRaises(kx.Error) as e:
                kx.Dataset.from_csv(os.path.join(d, "bad.csv"), "label")
            self.assertEqual(e.exception.code, -1)
            self.assertIn("line 3, column 1 ('a')", str(e.exception))
            np.save(os.path.join(d, "f2.npy"), x.astype(np.float16))
            with self.assertRaises(kx.Error) as e:
                kx.Dataset.from_npy(os.path.join(d, "f2.npy"), os.path.join(d, "y.npy"))
            self.assertIn("'<f2' is not supported", str(e.exception))


class ImageFolders(unittest.TestCase):
    def test_a_folder_of_pngs_trains_as_its_pixels_in_memory(self):
        rng = np.random.default_rng(3)
        with tempfile.TemporaryDirectory() as d:
            pixels, labels = [], []
            for label, name in enumerate(["cat", "dog"]):
                os.makedirs(os.path.join(d, name))
                for i in range(12):
                    px = rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)
                    px[..., label] //= 4  # something to learn
                    write_png(os.path.join(d, name, f"{i:02d}.png"), px)
                    pixels.append(px)
                    labels.append(label)
            with open(os.path.join(d, "dog", "broken.png"), "wb") as f:
                f.write(b"not a png")
            folder = kx.image_dataset_from_directory(d, image_size=(6, 5), batch_size=8, seed=5)
            self.assertEqual(folder.class_names, ["cat", "dog"])
            self.assertEqual(folder.num_skipped, 1)
            self.assertEqual(len(folder), 24)
            arrays = kx.Dataset.from_arrays(np.stack(pixels), np.array(labels)).shuffle(24, 5).batch(8)
            self.assertEqual(folder.feature_moments(3), arrays.feature_moments(3))
            folder.cache(os.path.join(d, "cache.bin")).prefetch(2)
            with model((6, 5, 3)) as a, model((6, 5, 3)) as b:
                a.fit(arrays, epochs=2)
                b.fit(folder, epochs=2)
                for wa, wb in zip(a.get_weights(), b.get_weights()):
                    np.testing.assert_array_equal(wa, wb)
            augmented = kx.Dataset.from_image_directory(d, (6, 5), 3).random_flip(seed=1).random_crop(4, 4, seed=2)
            with model((4, 4, 3)) as m:
                m.fit(augmented.batch(8).prefetch(1), epochs=1)
            with self.assertRaises(kx.Error):
                kx.image_dataset_from_directory(os.path.join(d, "missing"))


if __name__ == "__main__":
    unittest.main()
