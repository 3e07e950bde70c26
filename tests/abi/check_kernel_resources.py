#!/usr/bin/env python3
"""Every kernel of the library, on every built SM: no register spills, no stack
frame, and the verify kernel's shared memory within the SM's opt-in limit
(SPEC section 6, issue 3).

Each src/**/*.cu is compiled to a throw-away cubin once per SM
(`nvcc -cubin -arch=sm_XX -Xptxas -v -o /dev/null`: device code only, no host
compile) with the library's device flags, in parallel, and ptxas's report is
read per function:

  ptxas info    : Compiling entry function '<mangled>' for 'sm_90'
  ptxas info    : Function properties for <mangled>
      0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
  ptxas info    : Used 128 registers, used 1 barriers, 1024 bytes smem, ...

The verify kernel's dynamic shared memory is its config's kSmemBytes
(src/verify/verify_paged_config.cuh), read by a tiny host program built from
that header, together with config_built_for(): only the configs an SM really
runs are held to its limit (the others are empty stubs there).

usage: check_kernel_resources.py --nvcc NVCC --source-dir ROOT --archs "80;86;89;90;120"
                                 [--define NAME=VALUE]... [--jobs N]
Exit 0 when every check holds, 1 with one line per violation otherwise.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

# Opt-in shared memory per block (cudaDevAttrMaxSharedMemoryPerBlockOptin),
# bytes, per SM. An SM not listed here fails the test until it is added.
OPTIN_SMEM_BYTES = {
    80: 166912, 87: 166912,                   # 163 KB
    86: 101376, 89: 101376, 120: 101376, 121: 101376,  # 99 KB
    90: 232448, 100: 232448, 103: 232448,     # 227 KB
}

# Spills or a stack frame that are known and accepted: (regex on the demangled
# function name, SMs, why). Keep it to kernels we cannot change.
ALLOWED = [
    # None today. (CUB's onesweep pass for unsigned 32-bit keys spilled on
    # sm_120; src/defrag/sort.cu sorts signed keys instead.)
]

VERIFY_KERNEL = re.compile(
    r"verify_paged_kernel<kdtree::verify::TileConfig<(\d+), (\d+), (\d+)[^>]*>, [^,]+, (true|false)>")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nvcc", required=True)
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--archs", required=True, help='SM numbers, ";" or "," separated')
    parser.add_argument("--define", action="append", default=[], help="NAME=VALUE for every compile")
    parser.add_argument("--source-ptxas", action="append", default=[], metavar="PATH:OPTION",
                        help="a ptxas option for one source (path from --source-dir; CMakeLists.txt's "
                             "KDTREE_SOURCE_PTXAS_OPTIONS)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    return parser.parse_args()


def local_includes(path, src_dir, seen):
    """Bytes of path plus every project header it includes (once each): a cost
    estimate, so the heaviest compiles start first."""
    if path in seen or not os.path.isfile(path):
        return 0
    seen.add(path)
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    total = len(text)
    for header in re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, re.M):
        total += local_includes(os.path.join(src_dir, header), src_dir, seen)
    return total


def run(cmd):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc.returncode, proc.stdout


def timed(function, *args):
    begin = time.time()
    return (*function(*args), time.time() - begin)


def ptxas_report(text):
    """{function: {"entry": bool, "stack": n, "spill_stores": n, "spill_loads": n,
    "registers": n, "smem": n}} from one ptxas -v run."""
    functions = {}
    current = None
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            functions.setdefault(m.group(1), {})["entry"] = True
            continue
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            current = functions.setdefault(m.group(1), {})
            current.setdefault("entry", False)
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and current is not None:
            current["stack"], current["spill_stores"], current["spill_loads"] = map(int, m.groups())
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and current is not None:
            current["registers"] = int(m.group(1))
            s = re.search(r"(\d+) bytes smem", line)
            current["smem"] = int(s.group(1)) if s else 0
    return functions


def demangle(names):
    if not names or not shutil.which("c++filt"):
        return {n: n for n in names}
    out = subprocess.run(["c++filt"], input="\n".join(names), stdout=subprocess.PIPE,
                         text=True, check=True).stdout.splitlines()
    return dict(zip(names, out))


def verify_configs(args, defines, archs, workdir):
    """[(block_m, block_n, qk_n, fp8, smem_bytes, {sm: built})] from the config header."""
    program = os.path.join(workdir, "verify_configs.cu")
    with open(program, "w") as f:
        f.write("""#include <cstdio>
#include <cstdlib>
#include "verify/verify_paged_config.cuh"
using namespace kdtree::verify;
template <class Cfg, bool kFp8> void row(int argc, char** argv) {
  std::printf("%d %d %d %d %zu", Cfg::kBlockM, Cfg::kBlockN, Cfg::kQkN, int(kFp8), Cfg::kSmemBytes);
  for (int i = 1; i < argc; ++i)
    std::printf(" %d", int(config_built_for<Cfg, kFp8>(std::atoi(argv[i]) * 10)));
  std::printf("\\n");
}
int main(int argc, char** argv) {
  row<LargeConfig, false>(argc, argv);  row<LargeConfig, true>(argc, argv);
  row<MediumConfig, false>(argc, argv); row<MediumConfig, true>(argc, argv);
  row<SmallConfig, false>(argc, argv);  row<SmallConfig, true>(argc, argv);
}
""")
    exe = os.path.join(workdir, "verify_configs")
    rc, out = run([args.nvcc, "-std=c++17", f"-arch=sm_{archs[0]}", *defines,
                   "-I", os.path.join(args.source_dir, "include"),
                   "-I", os.path.join(args.source_dir, "src"), program, "-o", exe])
    if rc != 0:
        sys.exit(f"could not build the verify config table:\n{out}")
    rc, out = run([exe, *map(str, archs)])
    if rc != 0:
        sys.exit(f"verify config table failed:\n{out}")
    rows = []
    for line in out.split("\n"):
        if line.strip():
            m, n, qk, fp8, smem, *built = map(int, line.split())
            rows.append((m, n, qk, bool(fp8), smem, dict(zip(archs, map(bool, built)))))
    return rows


def main():
    args = parse_args()
    start = time.time()
    # "90a" is sm_90 built with its arch-specific features (the wgmma kernel).
    targets = {int(a.rstrip("a")): a for a in re.split(r"[;,\s]+", args.archs) if a}
    archs = sorted(targets)
    unknown = [a for a in archs if a not in OPTIN_SMEM_BYTES]
    if unknown:
        sys.exit(f"no opt-in shared memory limit known for sm_{unknown}: add it to OPTIN_SMEM_BYTES")
    src_dir = os.path.join(args.source_dir, "src")
    sources = sorted(os.path.normpath(os.path.join(root, f)) for root, _, files in os.walk(src_dir)
                     for f in files if f.endswith(".cu"))
    defines = [f"-D{d}" for d in args.define]
    # The library's device flags (Release): see CMakeLists.txt.
    flags = ["-std=c++17", "-O3", "-DNDEBUG", *defines, "-I", os.path.join(args.source_dir, "include"),
             "-I", src_dir, "-Xptxas", "-v", "-cubin", "-o", os.devnull]
    source_ptxas = {}  # source -> its own ptxas options
    for entry in args.source_ptxas:
        path, _, option = entry.partition(":")
        source = os.path.normpath(os.path.join(args.source_dir, path))
        if source not in sources:
            sys.exit(f"--source-ptxas {entry}: no such source under {src_dir}")
        source_ptxas.setdefault(source, []).append(f"-Xptxas={option}")
    cost = {s: local_includes(s, src_dir, set()) for s in sources}
    jobs = sorted(((s, a) for s in sources for a in archs), key=lambda j: -cost[j[0]])

    with tempfile.TemporaryDirectory() as workdir, ThreadPoolExecutor(max(1, args.jobs)) as pool:
        table = pool.submit(verify_configs, args, defines, archs, workdir)
        results = list(pool.map(lambda j: (j, timed(run, [args.nvcc, *flags, *source_ptxas.get(j[0], []),
                                                           f"-arch=sm_{targets[j[1]]}", j[0]])), jobs))
        configs = table.result()

    failures = []
    reports = {}  # (source, sm) -> functions
    for (source, sm), (rc, out, _) in results:
        rel = os.path.relpath(source, args.source_dir)
        if rc != 0:
            failures.append(f"{rel} sm_{sm}: nvcc failed:\n{out}")
            continue
        functions = ptxas_report(out)
        incomplete = [f for f, r in functions.items() if r["entry"] and "stack" not in r]
        if incomplete:
            failures.append(f"{rel} sm_{sm}: no stack/spill line for {incomplete[0]} (ptxas -v format changed?)")
        reports[(rel, sm)] = functions
    names = demangle(sorted({f for functions in reports.values() for f in functions}))

    used_allowances = set()
    verify_checked = {sm: 0 for sm in archs}
    per_sm = {sm: {"functions": 0, "spilling": 0, "max_registers": 0} for sm in archs}
    for (rel, sm), functions in sorted(reports.items()):
        for mangled, r in functions.items():
            if "stack" not in r:
                continue
            name = names.get(mangled, mangled)
            stats = per_sm[sm]
            stats["functions"] += 1
            stats["max_registers"] = max(stats["max_registers"], r.get("registers", 0))
            if r["stack"] or r["spill_stores"] or r["spill_loads"]:
                stats["spilling"] += 1
                allowed = [i for i, (pattern, sms, _) in enumerate(ALLOWED)
                           if sm in sms and re.search(pattern, name)]
                if allowed:
                    used_allowances.update(allowed)
                else:
                    failures.append(f"{rel} sm_{sm}: {name}: {r['stack']} bytes stack frame, "
                                    f"{r['spill_stores']} bytes spill stores, {r['spill_loads']} bytes spill loads")
            limit = OPTIN_SMEM_BYTES[sm]
            dynamic = 0
            v = VERIFY_KERNEL.search(name)
            if v:
                m, n, qk, fp8 = int(v.group(1)), int(v.group(2)), int(v.group(3)), v.group(4) == "true"
                matching = [c for c in configs if c[:4] == (m, n, qk, fp8)]
                if not matching:
                    failures.append(f"{rel} sm_{sm}: {name}: no config {m}x{n}x{qk} in verify_paged_config.cuh")
                    continue
                # The configs this SM runs are held to its limit (two configs
                # overridden to one shape: the larger of them).
                built = [c[4] for c in matching if c[5][sm]]
                if built:
                    dynamic = max(built)
                    verify_checked[sm] += 1
            if r.get("smem", 0) + dynamic > limit:
                failures.append(f"{rel} sm_{sm}: {name}: {r.get('smem', 0)} B static + {dynamic} B dynamic "
                                f"shared memory > {limit} B opt-in limit")
    for sm, count in verify_checked.items():
        if count == 0:
            failures.append(f"sm_{sm}: no verify_paged_kernel with a real body found: shared memory unchecked")

    print(f"{len(sources)} .cu files x {len(archs)} SMs ({', '.join(f'sm_{a}' for a in archs)}), "
          f"{args.jobs} jobs, {time.time() - start:.0f} s")
    slowest = sorted(results, key=lambda r: -r[1][2])[:4]
    print("  slowest compiles: " + ", ".join(f"{os.path.relpath(s, args.source_dir)} sm_{a} {r[2]:.0f} s"
                                             for (s, a), r in slowest))
    for sm in archs:
        s = per_sm[sm]
        print(f"  sm_{sm}: {s['functions']} functions, {s['spilling']} with spills or a stack frame, "
              f"max {s['max_registers']} registers, {verify_checked[sm]} verify kernels within "
              f"{OPTIN_SMEM_BYTES[sm]} B shared memory")
    for i, (_, sms, why) in enumerate(ALLOWED):
        if i in used_allowances:
            print(f"  allowed: {why}")
        elif any(sm in archs for sm in sms):
            print(f"  note: allow-list entry no longer needed: {why}")
    if failures:
        print(f"{len(failures)} violations:")
        for failure in failures:
            print("  " + failure)
        return 1
    print("no spills, no stack frames, shared memory within limits")
    return 0


if __name__ == "__main__":
    sys.exit(main())
