"""Java artifacts from the Maven repository, resolved once into a cache: the classpath of a real peer.

Apache Kafka's broker and its Java client are published as ordinary jars.  A classpath for any of them is
the artifact plus its runtime dependencies, which Maven computes; kproto asks ``mvn`` for it once, copies
the jars into a directory of its own cache, and from then on hands out that directory (``java -cp
'DIR/*'``).  Nothing else here knows Maven: a test harness, :class:`kproto.testing.ApacheKafka` and the
benchmarks all name coordinates and get a directory back.

Rules this module keeps:

* **One directory per set of coordinates**, named by a digest of the sorted set, under
  ``$KPROTO_CACHE_DIR/jars`` (default ``$XDG_CACHE_HOME/kproto/jars``, else ``~/.cache/kproto/jars``).
* **A directory is used only when it is complete and intact.**  Resolution writes into a fresh staging
  directory and renames it into place with a manifest (each jar's size and SHA-256) last; a reuse re-checks
  the manifest.  A directory that fails the check — a killed resolution, a truncated or altered jar — is
  removed and resolved again, with a warning saying so.
* **Only paths this module created are ever removed**: a directory is deleted only when it carries this
  module's marker file and sits in the cache's own ``jars`` folder.
* **Concurrent resolutions serialise** on a lock file, so two test processes never half-write one set.

Errors are :class:`JavaToolMissingError` (no ``java``/``mvn`` on ``PATH``: says what to install) and
:class:`JarResolutionError` (Maven refused: carries the tail of its output).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from kproto.errors import KprotoError

__all__ = [
    "JavaToolMissingError",
    "JarResolutionError",
    "cache_root",
    "require_tool",
    "resolve",
    "classpath",
]

#: Written into each resolved directory; the proof that this module made it (and may remove it).
MARKER = ".kproto-jars"
#: Each jar's size and SHA-256, written last: a directory without it is incomplete.
MANIFEST = "manifest.json"
#: Bound on one ``mvn`` run; the first resolution of Kafka's broker downloads ~100 MB.
RESOLVE_TIMEOUT_S = 900.0

_INSTALL_HINT = {
    "java": "a Java runtime 17+ (Debian: apt-get install openjdk-17-jdk-headless)",
    "javac": "a Java compiler 17+ (Debian: apt-get install openjdk-17-jdk-headless)",
    "mvn": "Apache Maven (Debian: apt-get install maven)",
}


class JavaToolMissingError(KprotoError):
    """A command kproto needs to run a Java peer (``java``, ``javac``, ``mvn``) is not on ``PATH``."""


class JarResolutionError(KprotoError):
    """Maven could not resolve a set of artifacts; the message ends with the tail of Maven's output."""


def require_tool(name: str) -> str:
    """The full path of ``name`` on ``PATH``, or :class:`JavaToolMissingError` naming what to install."""
    found = shutil.which(name)
    if found is None:
        hint = _INSTALL_HINT.get(name, name)
        raise JavaToolMissingError(f"{name!r} is not on PATH: install {hint}")
    return found


def cache_root(cache_dir: Optional[os.PathLike] = None) -> Path:
    """The directory resolved jar sets live under (created on first use)."""
    if cache_dir is not None:
        root = Path(cache_dir)
    elif os.environ.get("KPROTO_CACHE_DIR"):
        root = Path(os.environ["KPROTO_CACHE_DIR"])
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = Path(base) / "kproto"
    jars = root / "jars"
    jars.mkdir(parents=True, exist_ok=True)
    return jars


def _parse(coordinate: str) -> Tuple[str, str, str]:
    parts = coordinate.split(":")
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"artifact {coordinate!r} is not 'group:artifact:version'")
    return parts[0], parts[1], parts[2]


def _pom(coordinates: Sequence[str]) -> str:
    deps = "\n".join(
        "    <dependency><groupId>{}</groupId><artifactId>{}</artifactId><version>{}</version></dependency>".format(
            *_parse(c)
        )
        for c in coordinates
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        "  <groupId>kproto.local</groupId><artifactId>classpath</artifactId><version>0</version>\n"
        "  <packaging>pom</packaging>\n"
        f"  <dependencies>\n{deps}\n  </dependencies>\n"
        "</project>\n"
    )


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _manifest_of(lib: Path) -> Dict[str, List[object]]:
    return {p.name: [p.stat().st_size, _digest(p)] for p in sorted(lib.glob("*.jar"))}


def _intact(target: Path) -> Optional[str]:
    """None when ``target`` is a complete, unaltered set; otherwise what is wrong with it."""
    manifest = target / MANIFEST
    if not (target / MARKER).is_file() or not manifest.is_file():
        return "incomplete (no manifest)"
    try:
        expected = json.loads(manifest.read_text())["jars"]
    except (ValueError, KeyError, OSError) as exc:
        return f"unreadable manifest ({exc})"
    actual = _manifest_of(target / "lib")
    if actual != expected:
        changed = sorted(n for n in set(actual) | set(expected) if actual.get(n) != expected.get(n))
        return f"jars differ from the manifest: {', '.join(changed[:5])}"
    return None


def _remove_ours(path: Path, root: Path) -> None:
    # Only a directory directly under the cache's jars folder that carries the marker (or a staging
    # directory this module named) is ever removed.
    if path.parent != root:
        raise RuntimeError(f"refusing to remove {path}: not in {root}")
    if (path / MARKER).is_file() or path.name.startswith(".staging-"):
        shutil.rmtree(path, ignore_errors=True)


def resolve(
    artifacts: Iterable[str], *, cache_dir: Optional[os.PathLike] = None, timeout: float = RESOLVE_TIMEOUT_S
) -> Path:
    """The directory holding ``artifacts`` and their runtime dependencies as jars, resolving on first use.

    ``artifacts`` are ``group:artifact:version`` coordinates.  Returns ``DIR`` such that
    ``java -cp 'DIR/*'`` runs them.  Raises :class:`JavaToolMissingError` without ``mvn``, and
    :class:`JarResolutionError` when Maven fails or does not finish within ``timeout`` seconds.
    """
    coordinates = sorted(set(artifacts))
    for c in coordinates:
        _parse(c)
    root = cache_root(cache_dir)
    key = hashlib.sha256("\n".join(coordinates).encode()).hexdigest()[:16]
    target = root / key
    with (root / f".{key}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():
            problem = _intact(target)
            if problem is None:
                return target / "lib"
            warnings.warn(f"kproto: jar cache {target} is {problem}; removing it and resolving again", stacklevel=2)
            _remove_ours(target, root)
        for stale in root.glob(f".staging-{key}-*"):
            _remove_ours(stale, root)
        mvn = require_tool("mvn")
        staging = Path(tempfile.mkdtemp(prefix=f".staging-{key}-", dir=root))
        (staging / "pom.xml").write_text(_pom(coordinates))
        cmd = [
            mvn,
            "-B",
            "-q",
            "-f",
            str(staging / "pom.xml"),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={staging / 'lib'}",
            "-DincludeScope=runtime",
        ]
        try:
            done = subprocess.run(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, stdin=subprocess.DEVNULL
            )
        except subprocess.TimeoutExpired as exc:
            _remove_ours(staging, root)
            raise JarResolutionError(f"mvn did not resolve {coordinates} within {timeout:.0f} s") from exc
        if done.returncode != 0 or not any((staging / "lib").glob("*.jar")):
            _remove_ours(staging, root)
            tail = "\n".join(done.stdout.decode(errors="replace").splitlines()[-20:])
            raise JarResolutionError(f"mvn could not resolve {coordinates} (exit {done.returncode}):\n{tail}")
        (staging / MARKER).write_text("\n".join(coordinates) + "\n")
        (staging / MANIFEST).write_text(
            json.dumps({"artifacts": coordinates, "jars": _manifest_of(staging / "lib")}, indent=1)
        )
        staging.rename(target)
        return target / "lib"


def classpath(artifacts: Iterable[str], *, cache_dir: Optional[os.PathLike] = None) -> str:
    """``resolve(artifacts)`` as the ``-cp`` argument (``DIR/*``, java expands the wildcard)."""
    return str(resolve(artifacts, cache_dir=cache_dir) / "*")
