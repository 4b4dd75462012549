#!/usr/bin/env python3
"""Writes the misuse probe: a C program that calls every function of kx.h as a hostile or careless
caller would, in four groups per function, each group in a child process of its own (so that a crash
names the function and group that caused it):

  nulls     every pointer NULL, every number 0
  huge      valid handles; sizes SIZE_MAX, counts INT64_MAX / INT32_MAX, flags all ones, enums out of
            range, NaN for reals, empty strings, buffers filled with such values
  negative  valid handles; sizes 0, counts -1, reals -1, enums -1, paths into a missing directory
  callback  the huge group again, from inside a BATCH_END callback of a fit of the fixture's model

A call may succeed or fail; what it may not do is crash, hang, trip the sanitizers, return
KX_E_INTERNAL or an unknown code, fail without a message, or write an out-parameter when it fails.
Generated from kx.h, so a function added there is probed with no edit here.

  gen_misuse_probe.py kx.h out.c
"""
import re
import sys

MODES = ("nulls", "huge", "negative", "callback")

# What each parameter type gets in each mode: (setup lines, argument expression). `i` is the
# parameter's index; buffers are arrays of the probe (64 elements, enough for the fixture's model).
HANDLES = {"kx_strategy": "f->s", "kx_model": "f->m", "kx_dataset": "f->d", "kx_callbacks": "f->cb",
           "kx_history": "f->h"}
DESTROY = {"kx_strategy": "kx_strategy_destroy", "kx_model": "kx_model_destroy",
           "kx_dataset": "kx_dataset_destroy", "kx_callbacks": "kx_callbacks_destroy",
           "kx_history": "kx_history_destroy"}
OPTIONS = ("kx_compile_options", "kx_fit_options", "kx_reduce_lr_options")
# Structs kx fills for the caller (struct_size first, set by the caller).
OUT_STRUCTS = ("kx_training_memory",)


def parse(header):
    text = "\n".join(line for line in open(header, encoding="utf-8") if not line.lstrip().startswith("#"))
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = text.replace("KX_MUST_CHECK", " ")
    text = re.sub(r'KX_DEPRECATED\("[^"]*"\)', " ", text)
    functions = []
    for decl in text.split("KX_API")[1:]:
        decl = decl[:decl.index(";")]
        head, params = decl[:decl.index("(")], decl[decl.index("(") + 1:decl.rindex(")")]
        words = head.replace("*", " * ").split()
        name, ret = words[-1], " ".join(words[:-1])
        types = []
        for p in params.split(","):
            w = p.replace("*", " * ").split()
            if not w or w == ["void"]:
                continue
            types.append(" ".join(w[:-1]))
        functions.append((name, ret, types))
    return functions


def argument(t, i, mode):
    """(declarations, argument, after-call lines, out-parameter check) for type t in mode."""
    nulls = mode == "nulls"
    huge = mode in ("huge", "callback")
    base = t.replace("const", "").split()
    stars = base.count("*")
    core = base[0]
    if stars == 0:
        if core in ("size_t",):
            return "", "0" if nulls else ("SIZE_MAX" if huge else "0"), "", None
        if core == "int64_t":
            return "", "0" if nulls else ("INT64_MAX" if huge else "-1"), "", None
        if core == "int32_t":
            return "", "0" if nulls else ("INT32_MAX" if huge else "-1"), "", None
        if core in ("uint32_t", "uint64_t"):
            return "", "0" if nulls else ("(" + core + ")-1" if huge else "0"), "", None
        if core in ("double", "float"):
            return "", "0" if nulls else ("NAN" if huge else "-1"), "", None
        if core.endswith("_fn"):
            return "", "NULL" if nulls else "probe_" + core, "", None
        # An enum: out of range either way.
        return "", f"({core})0" if nulls else (f"({core})0x7fffffff" if huge else f"({core})-1"), "", None
    if nulls:
        return "", "NULL", "", None
    if stars == 1 and core in HANDLES:
        return "", HANDLES[core], "", None
    if stars == 2 and core in HANDLES:
        decl = f"  {core}* out{i} = ({core}*)SENTINEL;\n"
        after = f"  if (out{i} != ({core}*)SENTINEL) {DESTROY[core]}(out{i});\n"
        return decl, f"&out{i}", after, f"out{i} == ({core}*)SENTINEL"
    if stars == 1 and core in OPTIONS:
        fill = "0xff" if huge else "0"
        return f"  unsigned char opt{i}[512];\n  memset(opt{i}, {fill}, sizeof opt{i});\n", f"({t})opt{i}", "", None
    if stars == 1 and core in OUT_STRUCTS:
        fill = "0xff" if huge else "0"
        decl = (f"  unsigned char res{i}[512], was{i}[512];\n  memset(res{i}, {fill}, sizeof res{i});\n"
                f"  memcpy(was{i}, res{i}, sizeof was{i});\n")
        return decl, f"({t})res{i}", "", f"memcmp(res{i}, was{i}, sizeof res{i}) == 0"
    if stars == 1 and core == "char" and "const" in t:
        s = '""' if huge else '"/nonexistent-kx-probe/dir/x"'
        return "", s, "", None
    if stars == 2 and core == "char" and "const" in t:
        # A list of strings (device names, input names): NULL entries.
        return f"  const char* list{i}[64] = {{0}};\n", f"list{i}", "", None
    if stars == 2 and core == "char":
        decl = f"  char* out{i} = (char*)SENTINEL;\n"
        after = f"  if (out{i} != (char*)SENTINEL) kx_free(out{i});\n"
        return decl, f"&out{i}", after, f"out{i} == (char*)SENTINEL"
    if stars == 1 and core == "char":
        return f"  char buf{i}[64];\n  memset(buf{i}, 'z', sizeof buf{i});\n", f"buf{i}", "", None
    if stars == 1 and core in ("float", "double", "int64_t", "int32_t", "size_t", "void"):
        ctype = "float" if core == "void" else core
        value = {"float": "NAN", "double": "NAN", "int64_t": "INT64_MAX", "int32_t": "INT32_MAX",
                 "size_t": "SIZE_MAX"}[ctype] if huge else "-1"
        if ctype == "size_t" and not huge:
            value = "0"
        decl = (f"  {ctype} buf{i}[64];\n  for (int k_ = 0; k_ < 64; ++k_) buf{i}[k_] = ({ctype})({value});\n")
        return decl, f"({t})buf{i}", "", None
    raise SystemExit(f"gen_misuse_probe.py: no hostile value for parameter type '{t}'")


def call_block(name, ret, types, mode):
    decls, args, afters, checks = [], [], [], []
    for i, t in enumerate(types):
        d, a, after, check = argument(t, i, mode)
        decls.append(d)
        args.append(a)
        afters.append(after)
        if check:
            checks.append(check)
    call = f"{name}({', '.join(args)})"
    lines = ["".join(decls)]
    if ret == "kx_status":
        lines.append(f"  const kx_status st = {call};\n")
        lines.append(f'  check_status("{name}", st);\n')
        for c in checks:
            lines.append(f'  if (st < 0 && !({c})) report("{name}", "wrote an out-parameter although it failed");\n')
    elif ret == "void":
        lines.append(f"  {call};\n")
    else:
        lines.append(f"  (void){call};\n")
    lines.append("".join(afters))
    return "".join(lines)


def main():
    header, out = sys.argv[1], sys.argv[2]
    functions = parse(header)
    # Destroying the fixture's handles would leave it dangling for the fixture's own clean-up: the
    # destroy functions are probed with NULL (documented as safe) only.
    body = []
    cases = []
    for name, ret, types in functions:
        for mode in MODES:
            if name.endswith("_destroy") and mode != "nulls":
                continue
            if name == "kx_free" and mode != "nulls":
                continue
            fn = f"probe_{name}_{mode}"
            body.append(f"static void {fn}(fixture* f) {{\n  (void)f;\n{call_block(name, ret, types, mode)}}}\n")
            cases.append((name, mode, fn))
    with open(out, "w", encoding="utf-8") as o:
        o.write("/* Generated by tests/capi/gen_misuse_probe.py from kx.h: do not edit. */\n")
        o.write('#include "misuse_probe_main.h"\n\n')
        o.write("\n".join(body))
        o.write("\nconst probe_case kProbeCases[] = {\n")
        for name, mode, fn in cases:
            callback = "1" if mode == "callback" else "0"
            o.write(f'    {{"{name}", "{mode}", {fn}, {callback}}},\n')
        o.write("};\nconst size_t kProbeCaseCount = sizeof kProbeCases / sizeof kProbeCases[0];\n")


if __name__ == "__main__":
    main()
