"""Every function of kx.h has its ctypes signature in kx/_capi.py, with the same number of parameters
and types that fit (an integer of the same width, a double, a float, a pointer), and _capi.py declares
nothing kx.h lacks. So a function added to kx.h cannot be forgotten here, as Rust's header_matches."""
import ctypes
import os
import re
import unittest

from kx import _capi

HEADER = os.path.join(os.path.dirname(__file__), "..", "..", "..", "capi", "include", "kx", "kx.h")

# C base types (after const is dropped) -> the ctypes type of that width; enums cross as int32.
_SCALARS = {"int32_t": ctypes.c_int32, "int64_t": ctypes.c_int64, "uint32_t": ctypes.c_uint32,
            "uint64_t": ctypes.c_uint64, "size_t": ctypes.c_size_t, "double": ctypes.c_double,
            "float": ctypes.c_float, "kx_status": ctypes.c_int32}


def header_functions():
    """name -> (return type, [parameter types]) as C spells them, from kx.h."""
    text = "\n".join(line for line in open(HEADER, encoding="utf-8") if not line.lstrip().startswith("#"))
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = text.replace("KX_MUST_CHECK", " ")
    text = re.sub(r"KX_DEPRECATED\(\"[^\"]*\"\)", " ", text)
    out = {}
    for decl in text.split("KX_API")[1:]:
        decl = decl[:decl.index(";")]
        head, params = decl[:decl.index("(")], decl[decl.index("(") + 1:decl.rindex(")")]
        name = head.split()[-1]
        ret = " ".join(head.split()[:-1])
        types = []
        for p in params.split(","):
            words = p.replace("*", " * ").split()
            if not words or words == ["void"]:
                continue
            types.append(" ".join(words[:-1]))  # the last word is the parameter's name
        out[name] = (ret, types)
    return out


def fits(c_type, py_type):
    c = c_type.replace("const", "").replace("*", " * ").split()
    if "*" in c or c_type.startswith("kx_") and c_type.endswith("_fn"):
        # A pointer: c_void_p, c_char_p, POINTER(...), or a CFUNCTYPE for function pointers.
        return py_type in (ctypes.c_void_p, ctypes.c_char_p) or hasattr(py_type, "_type_") or \
            getattr(py_type, "_flags_", 0) & ctypes._FUNCFLAG_CDECL
    base = c[0]
    if base == "void":
        return py_type is None
    if base.startswith("kx_") and base not in _SCALARS:
        return py_type is ctypes.c_int32  # an enum
    return py_type is _SCALARS.get(base)


class HeaderMatches(unittest.TestCase):
    def test_every_function_has_a_matching_signature(self):
        header = header_functions()
        table = _capi._SIGNATURES
        self.assertEqual(sorted(set(header) - set(table)), [], "kx.h functions missing from _capi.py")
        self.assertEqual(sorted(set(table) - set(header)), [], "_capi.py declares functions kx.h lacks")
        for name, (ret, params) in header.items():
            res, args = table[name]
            with self.subTest(function=name):
                self.assertEqual(len(args), len(params), f"{name}: parameter count")
                self.assertTrue(fits(ret, res), f"{name}: returns {ret}, declared {res}")
                for i, (c, py) in enumerate(zip(params, args)):
                    self.assertTrue(fits(c, py), f"{name}: parameter {i} is {c}, declared {py}")


if __name__ == "__main__":
    unittest.main()
