"""Apache Kafka's own generated message classes (``org.apache.kafka:kafka-clients``) as a codec oracle.

The other peers read the same JSON message definitions kproto's specs were written from, so a misreading
shared with them passes unseen.  Kafka's ``*Data`` classes are the reference implementation itself:
``tests/java/KafkaCodecOracle.java`` is compiled against one kafka-clients release and runs as one
long-lived JVM that answers batches of cases over stdin/stdout (one JSON document per line; the
protocol is described at the top of the Java file).

:class:`KafkaJava` starts and talks to that process.  :func:`to_kafka_json` turns a kproto value (the
``to_dict()`` shape) into Kafka's JSON form (``*JsonConverter``); the mapping is documented in
``docs/java-oracle.md``.
"""

from __future__ import annotations

import base64
import json
import math
import subprocess
import uuid
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple

from kproto.testing import jars

HARNESS = Path(__file__).resolve().parent.parent / "java" / "KafkaCodecOracle.java"
#: Kafka's ``*JsonConverter`` classes need Jackson, which kafka-clients declares only at compile time.
JACKSON = "com.fasterxml.jackson.core:jackson-databind:2.19.0"


class KafkaJava:
    """One JVM running the harness against ``org.apache.kafka:kafka-clients:<kafka_version>``."""

    def __init__(self, kafka_version: str, workdir: Path) -> None:
        self.kafka_version = kafka_version
        java, javac = jars.require_tool("java"), jars.require_tool("javac")
        lib = jars.resolve([f"org.apache.kafka:kafka-clients:{kafka_version}", JACKSON])
        classes = workdir / f"classes-{kafka_version}"
        classes.mkdir(parents=True, exist_ok=True)
        cp = f"{lib}/*"
        done = subprocess.run(
            [javac, "-nowarn", "-d", str(classes), "-cp", cp, str(HARNESS)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"javac failed on {HARNESS.name} against kafka-clients {kafka_version}:\n"
                + done.stderr.decode(errors="replace")[-2000:]
            )
        self._proc: Optional[subprocess.Popen] = subprocess.Popen(
            [
                java,
                "-Xshare:auto",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-cp",
                f"{classes}:{cp}",
                "KafkaCodecOracle",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def _ask(self, request: Dict[str, Any]) -> Dict[str, Any]:
        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(request).encode() + b"\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        if not line:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise RuntimeError(f"the Kafka {self.kafka_version} oracle exited: {err[-2000:]}")
        return json.loads(line)

    def messages(self) -> List[Tuple[int, str, int, int]]:
        """(api key, "request"/"response", lowest, highest version) of every message the jar knows."""
        return [(m["key"], m["dir"], m["lowest"], m["highest"]) for m in self._ask({"op": "list"})["messages"]]

    def run(self, cases: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """The results of ``cases`` (see the Java file), in order; ``bytes`` come back decoded."""
        results = self._ask({"cases": cases})["results"]
        for r in results:
            if "bytes" in r:
                r["bytes"] = base64.b64decode(r["bytes"])
        return results

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            assert proc.stdin is not None
            proc.stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()


def read_case(key: int, direction: str, version: int, data: bytes) -> Dict[str, Any]:
    return {"op": "read", "key": key, "dir": direction, "version": version, "data": base64.b64encode(data).decode()}


def json_case(key: int, direction: str, version: int, doc: Dict[str, Any]) -> Dict[str, Any]:
    return {"op": "json", "key": key, "dir": direction, "version": version, "json": doc}


def default_case(key: int, direction: str, version: int) -> Dict[str, Any]:
    return {"op": "default", "key": key, "dir": direction, "version": version}


# ---------------------------------------------------------------------------------------------------
# kproto's to_dict() shape <-> Kafka's JSON form.


def kafka_uuid(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString()``: the 16 bytes in URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def camel(name: str) -> str:
    """Kafka's JSON key of a field: its name with the first letter lowercased."""
    return name[:1].lower() + name[1:]


class Names:
    """The JSON key each field has in one kafka-clients release.

    kproto names a field by Kafka's newest name and keeps the earlier ones as ``oldNames``; an older
    release's JSON uses the name it had then.  Keys are learnt from the documents the release writes."""

    def __init__(self) -> None:
        self._known: Dict[int, str] = {}

    def key(self, f: Any) -> str:
        return self._known.get(id(f), camel(f.name))

    def learn(self, struct: Any, version: int, doc: Any) -> None:
        """Learn the keys of ``struct``'s fields from one of the release's documents of it.

        A key is the field's name, else one of its old names (an older release), else — when exactly one
        field and one key are left unmatched at this level — that key (a newer release renamed it)."""
        if not isinstance(doc, dict):
            return
        fields = struct.fields_for(version)
        unmatched = []
        for f in fields:
            key = self.key(f)
            if key not in doc:
                for old in f.old_names:
                    if camel(old) in doc:
                        self._known[id(f)] = key = camel(old)
                        break
                else:
                    if not f.tagged_in(version):
                        unmatched.append(f)
        spare = set(doc) - {self.key(f) for f in fields}
        if len(unmatched) == 1 and len(spare) == 1:
            self._known[id(unmatched[0])] = spare.pop()
        for f in fields:
            t = f.type.element if f.type.is_array else f.type
            sub = doc.get(self.key(f))
            if t is not None and t.is_struct and sub is not None:
                for item in sub if isinstance(sub, list) else [sub]:
                    self.learn(t.struct, version, item)


def _leaf(kind: str, value: Any, records: bool) -> Any:
    if value is None:
        return None
    if kind == "uuid":
        return kafka_uuid(value)
    if kind == "records":
        # Kafka's converters write a record set as empty bytes whatever it holds (its content is not
        # JSON's business); reading one takes base64 like bytes.
        return base64.b64encode(value).decode() if records else ""
    if kind == "bytes":
        return base64.b64encode(value).decode()
    return value


def to_kafka_json(
    struct: Any, cls: Any, version: int, value: Dict[str, Any], names: Names, records: bool = True
) -> Dict[str, Any]:
    """``value`` (kproto's ``to_dict()`` of an instance of ``cls``) in Kafka's JSON form for ``version``.

    Fields the version lacks are left out, and so are tagged fields at their default (Kafka's converters
    write neither).  ``records=False`` writes record sets as Kafka's converters do (empty)."""
    subs = {name: sub for name, _, sub in cls._FIELDS}
    default = cls().to_dict()
    out: Dict[str, Any] = {}
    for f in struct.fields_for(version):
        v = value[f.attr]
        if f.tagged_in(version) and v == default[f.attr]:
            continue
        t = f.type
        if v is None:
            out[names.key(f)] = None
        elif t.is_array and t.element is not None and t.element.is_struct:
            out[names.key(f)] = [
                to_kafka_json(t.element.struct, subs[f.attr], version, item, names, records) for item in v
            ]
        elif t.is_array and t.element is not None:
            out[names.key(f)] = [_leaf(t.element.kind, item, records) for item in v]
        elif t.is_struct:
            out[names.key(f)] = to_kafka_json(t.struct, subs[f.attr], version, v, names, records)
        else:
            out[names.key(f)] = _leaf(t.kind, v, records)
    return out


def diff(expected: Any, actual: Any, path: str = "") -> Optional[str]:
    """The first place two JSON documents differ, or None."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for k in list(expected) + [k for k in actual if k not in expected]:
            if k not in expected or k not in actual:
                return f"{path}.{k}: only in {'kafka' if k in actual else 'kproto'}"
            d = diff(expected[k], actual[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return f"{path}: {len(expected)} elements vs {len(actual)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            d = diff(e, a, f"{path}[{i}]")
            if d:
                return d
        return None
    if isinstance(expected, float) and actual in ("Infinity", "-Infinity", "NaN"):
        actual = float(actual)  # Jackson writes non-finite doubles as strings
    if isinstance(expected, float) and isinstance(actual, float) and math.isnan(expected) and math.isnan(actual):
        return None
    same = (
        expected == actual
        and type(expected) is type(actual)
        or (isinstance(expected, float) and isinstance(actual, (int, float)) and expected == actual)
    )
    return None if same else f"{path}: kproto {expected!r} vs kafka {actual!r}"


def all_pairs(messages: Iterable[Tuple[int, str, int, int]]) -> List[Tuple[int, str, int]]:
    return [(k, d, v) for k, d, lo, hi in messages for v in range(lo, hi + 1)]
