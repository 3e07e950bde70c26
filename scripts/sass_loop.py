#!/usr/bin/env python3
"""The SASS of the sm_90a verify kernel's tile loop, for comparing two trees
before spending device time on an A/B.

Changes outside the loop that move ptxas's register allocation have slowed the
loop by 1-4% (docs/perf_notes.md, "Verify, session 8": 253 -> 227 registers grew
the loop by 119 IMAD). This compiles src/verify/verify_paged_sm90a.cu for
sm_90a, disassembles it and prints, per kernel instantiation: registers, total
instructions, and the instructions between the first QK wgmma (HGMMA.64x64) and
the last P V wgmma (HGMMA.64x256) with their mix. A larger span is a slower
loop until the device says otherwise.

With --base it also prints how many of each kernel's loop instructions
changed against the base's (registers, predicates and labels renamed away;
the edit distance of the two lists). A change outside the loop can still
make ptxas schedule the loop anew. Session 25 (bf16 partial-states kernel,
3,738 loop instructions): a change that left 7 different measured flat; one
that left 1,520 different measured +1.8..+3.4%, its loop 4% slower per tile
by stamps; two with 336 and 348 went either way (+1.1% and -0.9%). So a
probe whose loop changed measures its new schedule as much as itself
(docs/perf_notes.md, session 25).

  scripts/sass_loop.py                  the working tree
  scripts/sass_loop.py --base HEAD~1    the working tree and a git revision
  scripts/sass_loop.py --source src/verify/verify_paged_sm90a_pingpong.cu
      the same report for another kernel file
  scripts/sass_loop.py --base main --to-back-edge
      the loop up to its back edge: for a tree with P V code after the loop
      (a short last tile, docs/probe_patches/s46-3-short-tile-after-loop.patch)
  scripts/sass_loop.py --base HEAD --same [--source src/defrag/copy.cu]
      whether every kernel of the file compiles to the same instructions in
      both (symbol names aside): the check behind "SASS identical" in a
      refactor's commit message

Each tree's file is compiled with that tree's own per-source ptxas options
(CMakeLists.txt's KDTREE_SOURCE_PTXAS_OPTIONS), so --base compares trees as
each builds.

Needs nvcc and nvdisasm (the CUDA toolkit's, or NVDISASM=path; `pip download
nvidia-cuda-nvdisasm` has one). Host only: no GPU.
"""
import argparse
import collections
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = "src/verify/verify_paged_sm90a.cu"
LABEL = r"\.L_x_\d+"  # nvdisasm's branch-target labels
OPS = ["HGMMA", "IMAD", "IADD3", "LEA", "MOV", "FMUL", "FFMA", "MUFU", "LDS", "STS", "LDGSTS", "BAR", "BRA"]


def tool(name: str, env: str) -> str:
    path = os.environ.get(env) or shutil.which(name)
    if not path:
        sys.exit(f"sass_loop: {name} not found (set {env})")
    return path


def source_ptxas(tree: str, source: str) -> list:
    """The tree's own ptxas options for `source` (CMakeLists.txt's KDTREE_SOURCE_PTXAS_OPTIONS,
    "path:option" entries; none in trees from before it), as nvcc arguments."""
    try:
        with open(os.path.join(tree, "CMakeLists.txt"), encoding="utf-8") as f:
            m = re.search(r'set\(KDTREE_SOURCE_PTXAS_OPTIONS "([^"]*)"\)', f.read())
    except FileNotFoundError:
        return []
    entries = [e.partition(":") for e in m.group(1).split(";") if e] if m else []
    return [f"-Xptxas={option}" for path, _, option in entries if path == source]


def compile_tree(tree: str, work: str, source: str = SOURCE) -> tuple:
    cubin = os.path.join(work, "k.cubin")
    cmd = [tool("nvcc", "NVCC"), "-std=c++17", "-O3", "-arch=sm_90a", "-DKDTREE_SM90A=1",
           f"-I{tree}/include", f"-I{tree}/src", "-cubin", "-o", cubin, f"{tree}/{source}", "-Xptxas", "-v",
           *source_ptxas(tree, source)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"sass_loop: nvcc failed on {tree}:\n{done.stderr}")
    registers = re.findall(r"Used (\d+) registers", done.stderr)
    sass = subprocess.run([tool("nvdisasm", "NVDISASM"), "-c", cubin], capture_output=True, text=True, check=True)
    return registers, sass.stdout


def instructions(sass: str, labels: dict = None) -> dict:
    """Instruction texts per function, without addresses, comments and symbol
    operands (`(name): a call or return target's mangled name). With `labels`,
    also each function's labels: labels[function][label] = the index of the
    instruction that follows it."""
    out, current = {}, None
    for line in sass.splitlines():
        m = re.match(r"\s*\.text\.(\S+):", line)
        if m:
            current = m.group(1)
            out[current] = []
            if labels is not None:
                labels[current] = {}
            continue
        raw = re.sub(r"/\*[0-9a-f]*\*/", "", line).split(";")[0]
        # (a branch keeps its target label: `(.L_x_N) -> .L_x_N)
        text = re.sub(r"`\([^)]*\)", "", re.sub(f"`\\(({LABEL})\\)", r"\1", raw)).strip()
        if current is not None and labels is not None and re.fullmatch(f"{LABEL}:", text):
            labels[current][text[:-1]] = len(out[current])
            continue
        if current is None or not text or text.startswith((".", "/")) or text.endswith(":"):
            continue
        out[current].append(text)
    return out


def opcodes(texts: list) -> list:
    """The opcodes of instruction texts (predicates dropped)."""
    return [re.sub(r"^@!?U?P\w+\s+", "", text).split()[0] for text in texts]


def kernels(sass: str) -> dict:
    """Opcode lists per function."""
    return {name: opcodes(texts) for name, texts in instructions(sass).items()}


def same(base: str, tree: str, source: str) -> int:
    """Compares every function's instructions; functions pair up in name
    order (an anonymous namespace's mangled name differs per tree)."""
    with tempfile.TemporaryDirectory() as work:
        _, old = compile_tree(base, work, source)
        _, new = compile_tree(tree, work, source)
    old_fns, new_fns = sorted(instructions(old).items()), sorted(instructions(new).items())
    if len(old_fns) != len(new_fns):
        print(f"{source}: {len(old_fns)} functions in the base, {len(new_fns)} in the tree")
        return 1
    differ = 0
    for (name, a), (_, b) in zip(old_fns, new_fns):
        changed = sum(x != y for x, y in zip(a, b)) + abs(len(a) - len(b))
        differ += changed > 0
        print(f"{'identical' if changed == 0 else f'{changed} lines differ':>18s}  {len(b):6d} instructions  "
              f"{name[-60:]}")
    return 1 if differ else 0


def loop_range(ops: list, texts: list = None, labels: dict = None):
    """[first, last] of the tile loop in a kernel's opcodes: from its first QK wgmma to
    its last P V wgmma; None when the kernel has none. Given the texts and labels
    (--to-back-edge), the last P V wgmma before the first backward branch after the
    first QK wgmma to a label at or before it (the loop's back edge), so that code
    after the loop with P V wgmmas of its own stays out. (In the ping-pong kernel,
    whose score warpgroups each have a loop, only the loop that holds the first QK
    wgmma.)"""
    first = next((i for i, op in enumerate(ops) if op.startswith("HGMMA.64x64")), None)
    if first is None:
        return None
    end = len(ops)
    if texts is not None and labels:
        end = next((i for i, text in enumerate(texts) if i > first and ops[i] == "BRA"
                    and (m := re.search(LABEL, text)) and labels.get(m.group(0), i) <= first), end)
    last = max((i for i, op in enumerate(ops[:end]) if op.startswith("HGMMA.64x256")), default=None)
    return None if last is None or last < first else (first, last)


def renamed(text: str) -> str:
    """An instruction with its registers, predicates, labels and addresses renamed away, so
    that a renumbering alone does not count as a change."""
    text = re.sub(LABEL, "L", text)
    text = re.sub(r"\b0x[0-9a-f]+\b", "X", text)
    text = re.sub(r"\bU?R\d+\b", "R", text)
    return re.sub(r"\bU?P\d\b", "P", text)


def kernel_key(name: str) -> str:
    """A kernel's mangled name from its own name to the end of its template arguments,
    without the anonymous namespace's part, which differs per tree, nor its parameter
    types (a parameter added between two trees leaves the same kernel)."""
    m = re.search(r"([A-Za-z_]+_kernel)(I.*?E)v", name) or re.search(r"([A-Za-z_]+_kernel)(I.*)?$", name)
    return m.group(0) if m else name


def loop_change(old: list, new: list) -> int:
    """Instructions that differ between two loops (lists of instruction texts): the
    edit distance in whole instructions after renamed() (an instruction scheduled
    elsewhere counts twice: out of its old place, into its new one)."""
    a, b = [renamed(t) for t in old], [renamed(t) for t in new]
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal")


def report(label: str, tree: str, source: str = SOURCE, to_back_edge: bool = False) -> dict:
    """Prints each kernel's line; returns its loop's instruction texts by kernel, in name order."""
    with tempfile.TemporaryDirectory() as work:
        registers, sass = compile_tree(tree, work, source)
    loops, labels = {}, {}
    for (name, text), regs in zip(sorted(instructions(sass, labels).items()), registers or ["?"] * 8):
        ops = opcodes(text)
        dtype = "bf16" if "bfloat16" in name else "f16" if "half" in name else name[-30:]
        span = loop_range(ops, text, labels[name]) if to_back_edge else loop_range(ops)
        if span is None:
            print(f"{label} {dtype}: no tile loop found")
            continue
        first, last = span
        loops[name] = text[first:last + 1]
        mix = collections.Counter(op.split(".")[0] for op in ops[first:last + 1])
        print(f"{label:10s} {dtype:4s} registers {regs:>3s}  instructions {len(ops):5d}  loop span {last - first:5d}  " +
              " ".join(f"{op} {mix[op]}" for op in OPS))
    return loops


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", help="a git revision to compare against (built from `git archive`)")
    ap.add_argument("--same", action="store_true", help="with --base: whole-file instruction identity "
                    "(exit 1 when any function differs)")
    ap.add_argument("--source", default=SOURCE, help=f"the .cu file to compile (default {SOURCE})")
    ap.add_argument("--to-back-edge", action="store_true", help="end each loop at its back edge, not at "
                    "the kernel's last P V wgmma (a kernel with P V code after its loop: a short last tile)")
    args = ap.parse_args()
    if args.same and not args.base:
        ap.error("--same needs --base")
    if args.base:
        with tempfile.TemporaryDirectory() as base:
            archive = subprocess.run(["git", "-C", ROOT, "archive", args.base], capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", base], input=archive.stdout, check=True)
            if args.same:
                return same(base, ROOT, args.source)
            old = report(args.base[:10], base, args.source, args.to_back_edge)
    loops = report("tree", ROOT, args.source, args.to_back_edge)
    if args.base:
        base_loops = {kernel_key(name): text for name, text in old.items()}
        for name, text in sorted(loops.items()):
            a = base_loops.get(kernel_key(name))
            change = "  no such kernel in the base" if a is None else \
                f"{loop_change(a, text):5d} of {len(a):5d} instructions changed"
            print(f"loop vs {args.base[:10]}: {change}  {kernel_key(name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
