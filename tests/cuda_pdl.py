#!/usr/bin/env python3
"""Every kernel of the CUDA backend may be launched with programmatic dependent launch
(kernels/cuda/cuda_common.cuh): the kernel after it in the stream can then start while it
runs, and only its first instruction, sc_dev_pdl_enter(), makes it wait for the one
before to finish. A kernel that touched memory before that call would race with the
kernel before it, on the GPU only and only sometimes. So this checks, for every .cu and
.cuh file under kernels/cuda, that

  - every __global__ function's body begins with `sc_dev_pdl_enter();`, and
  - no kernel is launched with <<<...>>> (every launch goes through sc_kcuda_launch,
    which sets the attribute the check above makes safe, or sc_kcuda_launch_spread,
    which launches without it),

and exits 1 naming each place that does not. Declarations (prototypes) are skipped, their
definitions checked; subfolders are searched; a __global__ inside a macro is refused,
since the check cannot follow a macro to the kernels it declares.

    tests/cuda_pdl.py [ROOT]          (ctest runs it as `cuda_pdl`)
"""
import os
import re
import sys

GLOBAL = re.compile(r"__global__\b")
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def strip_comments(text):
    # keep line numbers: a comment becomes as many newlines as it had
    return COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def check(path, text):
    bad = []
    code = strip_comments(text)
    for m in GLOBAL.finditer(code):
        brace = code.find("{", m.end())
        semi = code.find(";", m.end())
        line = code.count("\n", 0, m.start()) + 1
        if code[:m.start()].rsplit("\n", 1)[-1].lstrip().startswith("#"):
            bad.append(f"{path}:{line}: __global__ in a macro (this check cannot follow it)")
            continue
        if semi != -1 and (brace == -1 or semi < brace):
            continue  # a declaration: its definition is checked where it is
        body = code[brace + 1:].lstrip()
        if not body.startswith("sc_dev_pdl_enter();"):
            bad.append(f"{path}:{line}: a kernel whose body does not begin with sc_dev_pdl_enter();")
    for m in re.finditer(r"<<<", code):
        line = code.count("\n", 0, m.start()) + 1
        bad.append(f"{path}:{line}: a <<<>>> launch (use sc_kcuda_launch)")
    return bad


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    folder = os.path.join(root, "kernels", "cuda")
    bad, kernels = [], 0
    paths = sorted(os.path.join(d, f) for d, _, files in os.walk(folder) for f in files)
    for path in paths:
        if path.endswith((".cu", ".cuh")):
            text = open(path, encoding="utf-8").read()
            kernels += len(GLOBAL.findall(strip_comments(text)))
            bad += check(os.path.relpath(path, root), text)
    for b in bad:
        print(b)
    if kernels == 0:
        print(f"{folder}: no kernel found (the check would pass vacuously)")
        return 1
    print(f"cuda_pdl: {kernels} __global__ found, {len(bad)} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
