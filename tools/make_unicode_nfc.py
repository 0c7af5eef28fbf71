#!/usr/bin/env python3
"""Writes model/text/unicode_nfc_unknown.inc: the code points whose NFC data Hugging Face's
tokenizers does not have, so that textgen's NFC normalizer (utf8proc) can leave them alone.

    /usr/bin/python3 tools/make_unicode_nfc.py [OUT]    (needs node and tests/npm)

Why: the library's NFC normalizer (the unicode-normalization-alignments crate) has old
tables; a combining mark or decomposition added later (U+07FD NKO DANTAYALAN, 11.0; Nag
Mundari's signs, 15.0) is, to it, an ordinary character: no reordering around it, nothing
composed with it. Debian's utf8proc 2.8 (Unicode 15.0) does reorder and compose them, so a
Qwen tokenizer (NFC) gave other ids for text holding them. textgen's NFC normalizes the text
between such characters and copies them as they are, which is what the library does.

How: every code point utf8proc 2.8 gives NFC data (a combining class, a canonical
decomposition, or a part in one) is normalized in a few contexts by the library (node) and
by utf8proc (ctypes); those where the two differ are listed, with the parts of compositions
the library does not make. The listed characters are then checked: the split normalization
gives the library's output on every probe. Output is deterministic.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import tempfile

from make_unicode_additions import ranges  # tools/, beside this script

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(SOURCE_DIR, "model", "text", "unicode_nfc_unknown.inc")

PROBE = r"""
const { nfcNormalizer } = require(process.argv[2]);
const strings = JSON.parse(require('fs').readFileSync(process.argv[3], 'utf8'));
const n = nfcNormalizer();
const version = require(require('path').join(process.argv[2], 'package.json')).version;
process.stdout.write(JSON.stringify({version, out: strings.map((s) => n.normalizeString(s))}));
"""


class Utf8proc:
    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libutf8proc.so.2")
        self.lib.utf8proc_NFC.restype = ctypes.c_void_p
        self.lib.utf8proc_NFD.restype = ctypes.c_void_p
        self.lib.utf8proc_unicode_version.restype = ctypes.c_char_p
        self.lib.free.argtypes = [ctypes.c_void_p]

        class Property(ctypes.Structure):
            _fields_ = [("category", ctypes.c_int16), ("combining_class", ctypes.c_int16)]
        self.lib.utf8proc_get_property.restype = ctypes.POINTER(Property)

    def _map(self, fn, s: str) -> str:
        p = fn(s.encode("utf-8"))
        out = ctypes.string_at(p).decode("utf-8")
        self.lib.free(p)
        return out

    def nfc(self, s: str) -> str:
        return self._map(self.lib.utf8proc_NFC, s)

    def nfd(self, s: str) -> str:
        return self._map(self.lib.utf8proc_NFD, s)

    def ccc(self, c: int) -> int:
        return self.lib.utf8proc_get_property(c).contents.combining_class


def split_nfc(u: Utf8proc, s: str, unknown: set[int]) -> str:
    """textgen's NFC: the text between unknown code points through utf8proc."""
    out, segment = [], []
    for ch in s:
        if ord(ch) in unknown:
            out.append(u.nfc("".join(segment)) if segment else "")
            out.append(ch)
            segment = []
        else:
            segment.append(ch)
    out.append(u.nfc("".join(segment)) if segment else "")
    return "".join(out)


def main() -> None:
    out_path = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_OUT
    package = os.path.join(SOURCE_DIR, "tests", "npm", "node_modules", "tokenizers")
    if not os.path.exists(os.path.join(package, "package.json")):
        raise SystemExit(f"{package} is missing: npm ci --prefix tests/npm")
    u = Utf8proc()
    candidates, parts = set(), {}
    for c in range(0x110000):
        if 0xD800 <= c < 0xE000 or 0xAC00 <= c <= 0xD7A3:  # Hangul is algorithmic.
            continue
        decomposed = u.nfd(chr(c)) if c >= 0x80 else chr(c)
        if u.ccc(c) != 0 or decomposed != chr(c):
            candidates.add(c)
            if decomposed != chr(c):
                parts[c] = [ord(x) for x in decomposed]
                candidates.update(parts[c])
    candidates = sorted(candidates)
    # c alone, c before a ccc-1 mark (which a known c of higher class lets pass), c after a
    # ccc-230 mark, and c's decomposition (which composes back where the library knows c).
    probes, owner = [], []
    for c in candidates:
        ch = chr(c)
        for s in (ch, "a" + ch + "\u0334", "a\u0301" + ch, "".join(map(chr, parts.get(c, [c])))):
            probes.append(s)
            owner.append(c)

    def library(strings: list[str]) -> tuple[str, list[str]]:
        with tempfile.TemporaryDirectory() as tmp:
            script, data = os.path.join(tmp, "probe.js"), os.path.join(tmp, "in.json")
            with open(script, "w") as f:
                f.write(PROBE)
            with open(data, "w", encoding="utf-8") as f:
                json.dump(strings, f)
            result = json.loads(subprocess.run(["node", script, package, data], check=True,
                                               capture_output=True, text=True).stdout)
        return result["version"], result["out"]

    version, theirs = library(probes)
    unknown = set()
    for s, c, t in zip(probes, owner, theirs):
        if u.nfc(s) != t:
            unknown.add(c)
            unknown.update(parts.get(c, []))
    # Known parts of unknown compositions stay known: drop them if that changes nothing.
    for c in sorted(unknown):
        if c in parts or u.ccc(c) != 0:
            continue
        trial = unknown - {c}
        if all(split_nfc(u, s, trial) == t for s, t in zip(probes, theirs) if chr(c) in s):
            unknown = trial
    wrong = [s for s, t in zip(probes, theirs) if split_nfc(u, s, unknown) != t]
    if wrong:
        raise SystemExit(f"{len(wrong)} probes still differ, e.g. {wrong[:3]!r}")

    spans = ranges(unknown)
    line = "constexpr CodeRange kNfcUnknown[] = {" + ", ".join(
        f"{{0x{a:X}, 0x{b:X}}}" for a, b in spans) + "};"
    body = []
    while len(line) > 100:
        cut = line.rfind("}, ", 0, 99) + 2
        body.append(line[:cut])
        line = "    " + line[cut + 1:]
    body.append(line)
    text = [
        "// Generated by tools/make_unicode_nfc.py: do not edit.",
        f"// The {len(unknown):,} code points whose NFC data (combining class, decomposition)",
        f"// Hugging Face's tokenizers {version} lacks and utf8proc "
        f"{u.lib.utf8proc_unicode_version().decode()} has:",
        f"// {len(candidates):,} candidates x 4 contexts checked, every probe equal after.",
        "// clang-format off",
        *body,
        "// clang-format on",
    ]
    with open(out_path, "w", encoding="utf-8") as f:
        f.write("\n".join(text) + "\n")
    print(f"wrote {out_path}: {len(unknown)} code points in {len(spans)} ranges "
          f"({len(candidates)} candidates, {len(probes)} probes)")


if __name__ == "__main__":
    main()
