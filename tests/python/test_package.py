"""The Python package installs offline with pip, as pyproject.toml describes it: into a virtual
environment (which sees Debian's numpy and setuptools) and into a --target directory, and the installed
`kx` is this source's, loads the library $KX_LIBRARY names and has kx.h's version.

    KX_LIBRARY=build/libkx.so.0 python3 tests/python/test_package.py
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.join(ROOT, "bindings", "python")


def header_version():
    text = open(os.path.join(ROOT, "capi", "include", "kx", "kx.h")).read()
    parts = [re.search(rf"^#define KX_VERSION_{p} (\d+)", text, re.M).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


PROBE = ("import importlib.metadata as md, kx; "
         "print(kx.__file__); print(kx.version()); print(md.version('kx'))")


class PipInstall(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        # pip builds in the source tree (build/, kx.egg-info): build from a copy.
        cls.source = os.path.join(cls.tmp.name, "source")
        shutil.copytree(PACKAGE, cls.source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
        cls.env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def assert_library(self):
        self.assertTrue(os.environ.get("KX_LIBRARY"), "set KX_LIBRARY to this build's libkx.so.0")

    def probe(self, python, where, extra_env=None):
        env = dict(self.env, **(extra_env or {}))
        out = subprocess.run([python, "-c", PROBE], env=env, cwd=self.tmp.name, check=True,
                             capture_output=True, text=True).stdout.split("\n")
        self.assertTrue(out[0].startswith(where), out[0])
        self.assertEqual(out[1], header_version())  # the library's
        self.assertEqual(out[2], header_version())  # the package's metadata

    def pip(self, python, *args):
        subprocess.run([python, "-m", "pip", "install", "--no-index", "--no-build-isolation", "--quiet", *args,
                        self.source], env=self.env, check=True)

    def test_pyproject_version_is_the_headers(self):
        text = open(os.path.join(PACKAGE, "pyproject.toml")).read()
        self.assertEqual(re.search(r'^version = "([^"]+)"', text, re.M).group(1), header_version())

    def test_virtual_environment(self):
        self.assert_library()
        venv = os.path.join(self.tmp.name, "venv")
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], check=True)
        python = os.path.join(venv, "bin", "python")
        self.pip(python)
        self.probe(python, venv)

    def test_target_directory(self):
        self.assert_library()
        target = os.path.join(self.tmp.name, "target")
        self.pip(sys.executable, "--no-deps", "--target", target)  # numpy: the system's
        self.probe(sys.executable, target, {"PYTHONPATH": target})


if __name__ == "__main__":
    unittest.main()
