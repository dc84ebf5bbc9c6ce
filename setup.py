"""Build of kproto's optional Cython extensions.

Two kinds of module are compiled:

* ``kproto/_fast/*.pyx`` — the hand-written hot core (message set framing, record decode/encode), with the
  hand-written C it calls (``kproto/_fast/_crc.c``: CRC-32 and CRC-32C, linked into ``_checksums`` alone,
  which the other modules cimport);
* ``kproto/_compiled/*.py`` — the compiled target of the hot generated codecs (Produce, Fetch, the group
  APIs, ... :data:`kproto.codegen.targets.COMPILED_MODULES`), written here from the specs by the same
  generator as the committed pure target ``kproto/_generated``, and compiled in Cython's pure-Python mode
  with the typed declarations of the ``.pxd`` written beside each.  The other APIs run on the pure target;
* ``kproto/_compiled/{message_base,wire,framing,record_set}.py`` — copies of the hand-written modules of
  :data:`COMPILED_COPIES` and of their ``.pxd``, compiled in pure-Python mode.  The source
  module binds its copy's names when it is built (:func:`kproto._backend.adopt_compiled_copy`), so that
  ``KPROTO_PURE=1`` needs no import hook to run the source.

The extensions are optional: without a compiler the package still installs and runs on its pure-Python
twins, and says so (``kproto.backend``).  ``KPROTO_REQUIRE_FAST=1`` turns a failed build into an error,
which CI uses so that a broken extension cannot pass unnoticed.
"""

from __future__ import annotations

import glob
import os
import shutil
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

REQUIRE_FAST = os.environ.get("KPROTO_REQUIRE_FAST") == "1"

#: The compiled codecs' flags: no debug information (Python's default -g doubles the objects).
GENERATED_FLAGS = ["-O2", "-g0"]
#: The hand-written core's flags: no debug information either (it would triple the core's objects and push
#: the installed package past 20 MB); ``KPROTO_DEBUG_SYMBOLS=1`` keeps it, for line numbers in valgrind or gdb.
FAST_FLAGS = ["-O3"] + ([] if os.environ.get("KPROTO_DEBUG_SYMBOLS") == "1" else ["-g0"])
COMPILED_DIR = os.path.join("kproto", "_compiled")
SKIP_FAST = os.environ.get("KPROTO_PURE_BUILD") == "1"
#: Hand-written modules on the codec path that are compiled too, each from a copy in ``kproto/_compiled``
#: (``kproto._compiled.<last part>``); each ends by adopting its copy (``kproto._backend.adopt_compiled_copy``).
COMPILED_COPIES = ("kproto.message_base", "kproto.wire", "kproto.records.record_set", "kproto.framing")


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


def _compiled_copies() -> dict:
    """The copies of the hand-written compiled modules (:data:`COMPILED_COPIES`) and their
    ``.pxd``, by file name in ``kproto/_compiled``; a ``.pxd`` cimports the other copies."""
    copies = {}
    for module in COMPILED_COPIES:
        leaf = module.rpartition(".")[2]
        for ext in (".py", ".pxd"):
            source = module.replace(".", "/") + ext
            if not os.path.exists(source):  # a module without typed declarations
                continue
            with open(source, encoding="utf-8") as f:
                text = f.read()
            if ext == ".pxd":
                for other in COMPILED_COPIES:
                    text = text.replace(
                        f"from {other} cimport", f"from kproto._compiled.{other.rpartition('.')[2]} cimport"
                    )
            copies[leaf + ext] = text
    return copies


def _write_compiled_target() -> list:
    """Write ``kproto/_compiled`` from the specs (a file only when its text changed, so that an
    incremental build recompiles only what a spec change touched); (module, source path) of each."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from kproto.codegen import generate_compiled

    os.makedirs(COMPILED_DIR, exist_ok=True)
    files = generate_compiled()
    files.update(_compiled_copies())
    for name, text in files.items():
        path = os.path.join(COMPILED_DIR, name)
        if not os.path.exists(path) or open(path, encoding="utf-8").read() != text:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
    for name in os.listdir(COMPILED_DIR):
        if name.endswith((".py", ".pxd")) and name not in files:
            os.remove(os.path.join(COMPILED_DIR, name))
    # Extensions an older build compiled from kproto/_generated itself would shadow the pure target.
    for path in glob.glob(os.path.join("kproto", "_generated", "*.so")) + glob.glob("kproto/_generated/*.c"):
        os.remove(path)
    # So would those an older build compiled from the hand-written modules in place (now their copies are).
    for module in COMPILED_COPIES:
        for path in glob.glob(module.replace(".", "/") + ".*.so") + glob.glob(module.replace(".", "/") + ".c"):
            os.remove(path)
    return [
        (name[:-3], os.path.join(COMPILED_DIR, name))
        for name in sorted(files)
        if name.endswith(".py") and name != "__init__.py"
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
    copies = [module.rpartition(".")[2] for module in COMPILED_COPIES]
    fast = [
        Extension(
            "kproto._fast." + os.path.splitext(os.path.basename(path))[0],
            [path] + _c_sources(path),
            depends=FAST_C_HEADERS + _c_sources(path),
            include_dirs=["kproto/_fast"],
            libraries=["z"],
            extra_compile_args=FAST_FLAGS,
            optional=optional,
        )
        for path in sorted(glob.glob("kproto/_fast/*.pyx"))
    ]
    generated = [
        Extension("kproto._compiled." + module, [path], extra_compile_args=GENERATED_FLAGS, optional=optional)
        for module, path in _write_compiled_target()
        if module not in copies
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
    # The copies of the hand-written modules on the codec path (their source stays the pure path); without
    # debug information, like the generated ones (it would double their size).
    plain = [
        Extension(
            "kproto._compiled." + leaf,
            [os.path.join(COMPILED_DIR, leaf + ".py")],
            extra_compile_args=GENERATED_FLAGS,
            optional=optional,
        )
        for leaf in copies
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
    setuptools would otherwise copy it as package data because the extensions list it as their sources.
    The compiled target's sources stay out too: they run only compiled, and the extensions are built."""

    def run(self) -> None:
        super().run()
        for path in glob.glob(os.path.join(self.build_lib, "kproto", "**", "*.c"), recursive=True):
            os.remove(path)
        for path in glob.glob(os.path.join(self.build_lib, COMPILED_DIR, "*.p*")):
            if not path.endswith("__init__.py"):
                os.remove(path)
        target = os.path.join(self.build_lib, "kproto", "_specs")
        os.makedirs(target, exist_ok=True)
        for path in glob.glob("specs/*.json"):
            shutil.copy(path, target)


class BuildExtOnEveryCore(build_ext):
    """Compile the extensions on every core unless ``-j``/``--parallel`` says otherwise: ``pip install .``
    runs ``build_ext`` without options."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if not self.parallel:
            self.parallel = os.cpu_count() or 1


setup(ext_modules=_extensions(), cmdclass={"build_py": BuildPyWithSpecs, "build_ext": BuildExtOnEveryCore})
