"""Build of kproto's optional Cython extensions.

Two kinds of module are compiled:

* ``kproto/_fast/*.pyx`` — the hand-written hot core (message set framing, record decode/encode), with the
  hand-written C it calls (``kproto/_fast/_crc.c``: CRC-32 and CRC-32C);
* ``kproto/_generated/*.py`` — the generated codecs, compiled as they are (pure-Python mode) with the
  type declarations of their generated ``.pxd`` companions, so one source serves both backends.

The extensions are optional: without a compiler the package still installs and runs on its pure-Python
twins, and says so (``kproto.backend``).  ``KPROTO_REQUIRE_FAST=1`` turns a failed build into an error,
which CI uses so that a broken extension cannot pass unnoticed.
"""

from __future__ import annotations

import glob
import os
import shutil

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

REQUIRE_FAST = os.environ.get("KPROTO_REQUIRE_FAST") == "1"

#: Generated modules on a client's or a proxy's hot path, compiled with -O2.  The other ~80 APIs (admin,
#: inter-broker, KRaft, share groups, ...) hold most of the ~160 MB of generated C; they are compiled
#: without optimisation, about a fifth of -O2's compile time, which keeps the whole build within its
#: budget on two cores, and still many times faster than their pure-Python selves.  No debug information
#: for any generated module (Python's default -g roughly doubles the objects and adds compile time).
HOT_MODULES = frozenset(
    {
        "api_versions",
        "consumer_protocol",
        "fetch",
        "find_coordinator",
        "headers",
        "heartbeat",
        "join_group",
        "leave_group",
        "list_offsets",
        "metadata",
        "offset_commit",
        "offset_fetch",
        "produce",
        "sync_group",
    }
)
GENERATED_HOT_FLAGS = ["-O2", "-g0"]
GENERATED_COLD_FLAGS = ["-O0", "-g0"]
SKIP_FAST = os.environ.get("KPROTO_PURE_BUILD") == "1"


#: The hand-written C of the compiled core: ``kproto/_fast/_NAME.c`` with its ``_NAME.h`` and a ``_NAME.pxd``
#: that declares it to Cython.  A ``.pyx`` that cimports ``kproto._fast._NAME`` is linked with ``_NAME.c``.
FAST_C_HEADERS = sorted(glob.glob("kproto/_fast/*.h"))


def _c_sources(pyx: str) -> list:
    with open(pyx, encoding="utf-8") as f:
        text = f.read()
    return [
        c
        for c in sorted(glob.glob("kproto/_fast/_*.c"))
        if os.path.exists(c[:-2] + ".h") and f"kproto._fast.{os.path.basename(c)[:-2]} cimport" in text
    ]


def _extensions() -> list:
    if SKIP_FAST:
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        if REQUIRE_FAST:
            raise
        return []
    optional = not REQUIRE_FAST
    fast = [
        Extension(
            "kproto._fast." + os.path.splitext(os.path.basename(path))[0],
            [path] + _c_sources(path),
            depends=FAST_C_HEADERS + _c_sources(path),
            include_dirs=["kproto/_fast"],
            libraries=["z"],
            extra_compile_args=["-O3"],
            optional=optional,
        )
        for path in sorted(glob.glob("kproto/_fast/*.pyx"))
    ]
    generated = [
        Extension(
            "kproto._generated." + os.path.splitext(os.path.basename(path))[0],
            [path],
            extra_compile_args=GENERATED_HOT_FLAGS
            if os.path.basename(path)[:-3] in HOT_MODULES
            else GENERATED_COLD_FLAGS,
            optional=optional,
        )
        for path in sorted(glob.glob("kproto/_generated/*.py"))
        if os.path.exists(path[:-3] + ".pxd")
    ]
    directives = {"boundscheck": False, "wraparound": False, "cdivision": True, "embedsignature": True}
    # The generated modules must behave exactly like their pure-Python selves, so Cython may not turn
    # their annotations into type checks.
    plain_directives = dict(directives, annotation_typing=False, binding=True)
    # The generated codecs also let Cython infer C types from C expressions (positions, counts, fixed-width
    # fields read by the C readers): every such value is bounded by the buffer's length before arithmetic.
    # No per-class pickling code (kproto.message_base.Struct.__reduce__ serves every class) and plain C
    # functions for the codecs: both shrink the generated C a good deal.
    generated_directives = dict(
        plain_directives, infer_types=True, auto_pickle=False, binding=False, embedsignature=False
    )
    # Hand-written modules on the codec path, compiled as they are (their source stays the pure path).
    plain = [
        Extension(module, [module.replace(".", "/") + ".py"], extra_compile_args=["-O2"], optional=optional)
        for module in ("kproto.message_base", "kproto.framing", "kproto.wire", "kproto.records.record_set")
    ]
    # Cythonize on every core too (the C compile is parallel with ``build_ext -j``/``--parallel``).
    workers = os.cpu_count() or 1
    return (
        cythonize(fast, language_level=3, compiler_directives=directives, nthreads=workers)
        + cythonize(generated, language_level=3, compiler_directives=generated_directives, nthreads=workers)
        + cythonize(plain, language_level=3, compiler_directives=plain_directives, nthreads=workers)
    )


class BuildPyWithSpecs(build_py):
    """Ship the schema files inside the package so installed copies can load them too, and leave out the
    C that Cython generated: it is a build product of the ``.py``/``.pyx`` sources (which ship), and
    setuptools would otherwise copy it as package data because the extensions list it as their sources."""

    def run(self) -> None:
        super().run()
        for path in glob.glob(os.path.join(self.build_lib, "kproto", "**", "*.c"), recursive=True):
            os.remove(path)
        target = os.path.join(self.build_lib, "kproto", "_specs")
        os.makedirs(target, exist_ok=True)
        for path in glob.glob("specs/*.json"):
            shutil.copy(path, target)


class BuildExtOnEveryCore(build_ext):
    """Compile the extensions on every core unless ``-j``/``--parallel`` says otherwise: ``pip install .``
    runs ``build_ext`` without options, and the 95 generated modules take about 8.5 CPU-minutes."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if not self.parallel:
            self.parallel = os.cpu_count() or 1


setup(ext_modules=_extensions(), cmdclass={"build_py": BuildPyWithSpecs, "build_ext": BuildExtOnEveryCore})
