"""The pure target's one decoder and one encoder per struct (:mod:`kproto.codegen.per_struct`): each
version runs exactly the statements of its own layout, and a loop tests a flag computed once per call."""

from __future__ import annotations

import re

from kproto.codegen import generate_all
from kproto.codegen.per_struct import fold
from kproto.codegen.targets import COMPILED_MODULES

LAYOUTS = '''\
def _dec_T_v0(buf, cur, end):
    """Decode T (v0 layout) from buf[cur.pos:end]; move cur.pos past it."""
    out = [_dec_U_v0(buf, cur, end)]
    for i in range(buf):
        out.append(i)
    return out


def _dec_T_v2(buf, cur, end):
    """Decode T (v2 layout) from buf[cur.pos:end]; move cur.pos past it."""
    out = [_dec_U_v2(buf, cur, end)]
    for i in range(buf):
        out.append(i)
        out.append(-i)
    if end:
        out.append(end)
    return out


def _dec_T_v3(buf, cur, end):
    """Decode T (v3 layout) from buf[cur.pos:end]; move cur.pos past it."""
    out = [_dec_U_v2(buf, cur, end)]
    for i in range(buf):
        out.append(i)
    return out
'''


def _dec_U(version, buf, cur, end):
    return ("U", version)


def _dec_U_v0(buf, cur, end):
    return ("U", 0)


def test_each_version_runs_its_own_layout():
    served = {"_dec_T_v0": (0, 1), "_dec_T_v2": (2,), "_dec_T_v3": (3, 4)}
    text = "\n".join(fold(LAYOUTS.split("\n"), served, lambda name: False))
    assert len(re.findall(r"^def ", text, re.M)) == 1 and "def _dec_T(version, buf, cur, end):" in text
    # The loop's test is a flag computed at the top; the test outside the loop compares the version.
    assert "    v2_only = version == 2\n" in text and "if v2_only:" in text and "if version == 2:" in text
    merged: dict = {"_dec_U": _dec_U}
    exec(text, merged)
    layouts: dict = {"_dec_U_v0": _dec_U_v0, "_dec_U_v2": lambda buf, cur, end: ("U", 2)}
    exec(LAYOUTS, layouts)
    for layout, versions in served.items():
        for version in versions:
            got = merged["_dec_T"](version, 3, None, 7)
            # Nested calls pass the version on; the layouts called their nested layout by name.
            assert got[0] == ("U", version) and got[1:] == layouts[layout](3, None, 7)[1:], (layout, version)


def test_pure_target_has_one_codec_per_struct():
    """Every message has one decoder and one encoder; nested structs too, but in the hot modules, whose
    per-element encoders keep a function per layout."""
    for name, text in generate_all().items():
        if not name.endswith(".py"):
            continue
        defs = re.findall(r"^def (_(?:dec|enc)_\w+)\(", text, re.M)
        assert len(defs) == len(set(defs)), f"{name} defines a codec twice"
        per_layout = {d for d in defs if re.search(r"_v\d+$", d)}
        for root in re.findall(r"_DECODERS = _decoders\((_dec_\w+),", text):
            assert root in defs and not {d for d in per_layout if d.startswith(root + "_v")}, root
        if name[:-3] not in COMPILED_MODULES:
            assert not per_layout, f"{name} keeps per-layout functions"


ELEMENT_LAYOUTS = '''\
def _enc_R_v0(obj, out):
    """Append the v0 layout of a R to ``out``."""
    for item in obj:
        _enc_E_v0(item, out)


def _enc_R_v1(obj, out):
    """Append the v1 layout of a R to ``out``."""
    out.append(-1)
    for item in obj:
        _enc_E_v1(item, out)
'''


def test_a_loop_over_kept_element_encoders_picks_one_before_the_loop():
    served = {"_enc_R_v0": (0,), "_enc_R_v1": (1, 2)}
    text = "\n".join(fold(ELEMENT_LAYOUTS.split("\n"), served, lambda name: name == "_enc_E"))
    loop = text.index("    for item in obj:\n")
    assert text[loop:].split("\n")[1] == "        element(item, out)"  # no version test per element
    assert "element = _enc_E_v0" in text[:loop] and "element = _enc_E_v1" in text[:loop]
    namespace: dict = {
        "_enc_E_v0": lambda item, out: out.append(("v0", item)),
        "_enc_E_v1": lambda item, out: out.append(("v1", item)),
    }
    exec(text, namespace)
    for version, layout in ((0, "v0"), (1, "v1"), (2, "v1")):
        out: list = []
        namespace["_enc_R"](version, [7, 8], out)
        assert out == ([] if version == 0 else [-1]) + [(layout, 7), (layout, 8)], version


def test_hot_encoders_test_no_version_per_element():
    """In the pure target, a loop over elements never starts with a version test."""
    for name, text in generate_all().items():
        if name.endswith(".py"):
            lines = text.split("\n")
            for n, line in enumerate(lines[:-1]):
                if line.lstrip().startswith("for item in "):
                    assert not re.match(r"\s+(if|elif) v\d", lines[n + 1]), f"{name}:{n + 2}: {lines[n + 1]}"
