#!/usr/bin/env python3
"""The `layering` test: Loom's layers point one way (docs/architecture.md, "Layers").

Reads the #include lines of every source file of the library and fails, naming each
offending line, when
  - a file includes a header of a higher layer
        core < kernels < autograd < nn < optim, distributed < data, train, onnx
    (optim may use nn: checkpoints and gradient clipping take Modules and parameters;
    distributed may use nn too, for data-parallel modules, and stands beside optim;
    data, train and onnx are side by side and use none of each other);
  - a file of nn/, optim/, distributed/, data/, train/ or onnx/ includes kernels/: the layers
    above autograd/ reach the kernels only through it, where every choice between a fused
    kernel and a composition, every backward node and every op they call lives
    (autograd/functions/);
  - a file under kernels/cpu/ includes anything of CUDA (kernels/cuda/ or core/cuda*.h), or
    a file outside kernels/cuda/ includes kernels/cuda/ (the router reaches it through the
    backend table, Note [kernel routing] in kernels/backend.h);
  - headers include each other (directly or in a cycle), or two implementation files each
    include the other's header (a.cpp -> b.h and b.cpp -> a.h);
  - a file above kernels/ tests LOOM_WITH_CUDA or LOOM_WITH_CUDNN (the build option picks the
    backend that registers; nothing above the kernels needs to know).

Usage: check_layering.py REPO_ROOT
"""
import os
import re
import sys

RANK = {"core": 0, "kernels": 1, "autograd": 2, "nn": 3, "optim": 4, "distributed": 4, "data": 5,
        "train": 5, "onnx": 5}
ABOVE_KERNELS = {"autograd", "nn", "optim", "distributed", "data", "train", "onnx"}
ABOVE_AUTOGRAD = ABOVE_KERNELS - {"autograd"}
SOURCE = (".h", ".cpp", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
BUILD_TEST = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif)\b.*\bLOOM_WITH_CUD(A|NN)\b")


def layer(path):
    return path.split("/", 1)[0]


def unit(path):
    return os.path.splitext(path)[0]


def main(root):
    includes = {}  # file -> [(line number, included path)]
    problems = []
    for top in RANK:
        for folder, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith(SOURCE):
                    continue
                path = os.path.relpath(os.path.join(folder, name), root)
                found = []
                with open(os.path.join(root, path), errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if m:
                            found.append((number, m.group(1)))
                        if layer(path) in ABOVE_KERNELS and BUILD_TEST.match(line):
                            problems.append(f"{path}:{number}: tests a CUDA build option above kernels/: "
                                            f"{line.strip()}")
                includes[path] = found

    for path, found in sorted(includes.items()):
        for number, target in found:
            where = f"{path}:{number}: includes {target}"
            if layer(target) in RANK and RANK[layer(target)] > RANK[layer(path)]:
                problems.append(f"{where} (a higher layer: {layer(target)}/ above {layer(path)}/)")
            elif layer(target) in RANK and layer(target) != layer(path) and \
                    RANK[layer(target)] == RANK[layer(path)]:
                problems.append(f"{where} (a layer beside {layer(path)}/, not below it)")
            if layer(path) in ABOVE_AUTOGRAD and layer(target) == "kernels":
                problems.append(f"{where} (reaches past autograd/ into kernels/: call the op autograd/ has for it)")
            cuda = target.startswith("kernels/cuda/") or target.startswith("core/cuda")
            if path.startswith("kernels/cpu/") and cuda:
                problems.append(f"{where} (the CPU backend knows nothing of CUDA)")
            if target.startswith("kernels/cuda/") and not path.startswith("kernels/cuda/"):
                problems.append(f"{where} (only the CUDA backend includes its own headers)")

    # Headers that include each other, directly or in a cycle, by depth-first search.
    headers = {p: [t for _, t in found if t in includes and t.endswith((".h", ".cuh"))]
               for p, found in includes.items() if p.endswith((".h", ".cuh"))}
    state = {}  # header -> 1 on the stack, 2 done
    stack = []

    def visit(u):
        state[u] = 1
        stack.append(u)
        for v in sorted(headers.get(u, ())):
            if state.get(v) == 1:
                problems.append("include cycle: " + " -> ".join(stack[stack.index(v):] + [v]))
            elif v not in state:
                visit(v)
        stack.pop()
        state[u] = 2

    for u in sorted(headers):
        if u not in state:
            visit(u)

    # Two implementations that each include the other's header (a.cpp -> b.h, b.cpp -> a.h):
    # neither piece is below the other.
    uses = {}  # unit -> the units whose headers its implementation files include
    for path, found in includes.items():
        if not path.endswith((".h", ".cuh")):
            uses.setdefault(unit(path), set()).update(unit(t) for _, t in found if t in includes)
    for a in sorted(uses):
        for b in sorted(uses[a]):
            if a < b and a in uses.get(b, ()):
                problems.append(f"{a} and {b}: each one's implementation includes the other's header")

    for p in problems:
        print(p)
    print(f"layering: {len(includes)} files checked, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
