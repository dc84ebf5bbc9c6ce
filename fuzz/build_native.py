"""Build coverage-instrumented copies of kproto's Cython extensions, so atheris sees inside them.

atheris instruments Python bytecode by itself; C code reports coverage to libFuzzer only when it was
compiled with SanitizerCoverage.  The regular build uses the default compiler without it, so this script
recompiles the C files Cython already generated (``kproto/**/*.c``, left next to each extension) with
``clang -fsanitize-coverage=inline-8bit-counters,pc-table,trace-cmp`` into a cache directory outside the
work tree, and links clang's ``libclang_rt.fuzzer_no_main`` into a shared library.  A harness started with
that library in ``LD_PRELOAD`` (``fuzz/native_coverage.py`` arranges it) loads the instrumented extensions in
place of the regular ones; atheris then says ``Using preloaded libfuzzer`` and
``Loaded N modules (... inline 8-bit counters)``.

Needs clang (Debian: ``apt-get install clang-14``); without it the harnesses still run, on the regular
extensions, with Python-level coverage only (``run_all.py`` says so).  Rebuilds only what changed.

    python fuzz/build_native.py [--jobs N]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
from typing import List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COVERAGE_FLAGS = ["-fsanitize-coverage=inline-8bit-counters,pc-table,trace-cmp"]


def cache_dir() -> str:
    base = os.environ.get("KPROTO_FUZZ_NATIVE_DIR")
    if base:
        return base
    return os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "kproto-fuzz-native")


def find_clang() -> Optional[str]:
    for name in (os.environ.get("CLANG", ""), "clang", "clang-18", "clang-17", "clang-16", "clang-15", "clang-14"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def fuzzer_runtime(clang: str) -> Optional[str]:
    out = subprocess.run([clang, "-print-resource-dir"], capture_output=True, text=True).stdout.strip()
    for path in glob.glob(os.path.join(out, "lib", "**", "libclang_rt.fuzzer_no_main*x86_64*.a"), recursive=True):
        return path
    for path in glob.glob(os.path.join(out, "lib", "**", "libclang_rt.fuzzer_no_main*.a"), recursive=True):
        return path
    return None


def extension_sources() -> List[str]:
    """The .c file of every compiled kproto module that has an extension next to it."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    out = []
    for c_file in sorted(glob.glob(os.path.join(ROOT, "kproto", "**", "*.c"), recursive=True)):
        if os.path.exists(c_file[:-2] + suffix):
            out.append(c_file)
    return out


def module_name(c_file: str) -> str:
    rel = os.path.relpath(c_file[:-2], ROOT)
    return rel.replace(os.sep, ".")


def compile_command(name: str) -> Tuple[List[str], List[str]]:
    """(compiler flags, libraries) for the instrumented build of module ``name``."""
    flags = [
        "-O1",
        "-g",
        "-fPIC",
        "-shared",
        "-fno-omit-frame-pointer",
        *COVERAGE_FLAGS,
        "-I" + sysconfig.get_paths()["include"],
        "-w",
    ]
    libs = ["-lz"] if name.startswith("kproto._fast.") else []
    return flags, libs


def source_digest(c_file: str, name: str) -> str:
    """Identifies one build: the C source and the flags (an instrumented .so is used only if it matches)."""
    flags, libs = compile_command(name)
    h = hashlib.sha256(" ".join(flags + libs).encode())
    with open(c_file, "rb") as f:
        h.update(f.read())
    return h.hexdigest()[:16]


def build_one(clang: str, c_file: str, out_dir: str) -> str:
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    name = module_name(c_file)
    target = os.path.join(out_dir, name + suffix)
    flags, libs = compile_command(name)
    stamp = target + ".sha"
    digest = source_digest(c_file, name)
    if os.path.exists(target) and os.path.exists(stamp) and open(stamp).read() == digest:
        return f"up to date  {name}"
    tmp = target + ".tmp"
    subprocess.run([clang, *flags, c_file, *libs, "-o", tmp], check=True)
    os.replace(tmp, target)
    with open(stamp, "w") as f:
        f.write(digest)
    return f"built       {name}"


def build(jobs: int = 1, quiet: bool = False) -> Optional[str]:
    """Build everything; return the cache directory, or None when clang is missing."""
    clang = find_clang()
    if clang is None:
        print(
            "build_native: no clang found; harnesses will use the regular extensions (Python coverage only)",
            file=sys.stderr,
        )
        return None
    out_dir = cache_dir()
    os.makedirs(out_dir, exist_ok=True)
    runtime = fuzzer_runtime(clang)
    lib = os.path.join(out_dir, "libfuzzer_no_main.so")
    if runtime is None:
        print("build_native: clang has no libclang_rt.fuzzer_no_main; install libclang-rt-*-dev", file=sys.stderr)
        return None
    if not os.path.exists(lib):
        subprocess.run(
            [
                clang,
                "-shared",
                "-fPIC",
                "-Wl,--whole-archive",
                runtime,
                "-Wl,--no-whole-archive",
                "-lstdc++",
                "-lpthread",
                "-o",
                lib + ".tmp",
            ],
            check=True,
        )
        os.replace(lib + ".tmp", lib)
    sources = extension_sources()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for line in pool.map(lambda c: build_one(clang, c, out_dir), sources):
            if not quiet:
                print("build_native:", line, flush=True)
    return out_dir


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    out = build(args.jobs)
    if out:
        print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
