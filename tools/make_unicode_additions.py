#!/usr/bin/env python3
"""Writes model/text/unicode_class_additions.inc: the code points Hugging Face's tokenizers
put in each Unicode general category class (\\p{L}, \\p{N}, ...) that PCRE2 10.42 does not.

    /usr/bin/python3 tools/make_unicode_additions.py [OUT]    (needs node and tests/npm)

Why: tokenizer.json regexes run on Oniguruma inside `tokenizers`, whose tables are Unicode
16.0 (tokenizers 0.23.2, probed here); Debian bookworm's PCRE2 10.42 has Unicode 14.0, so a
character assigned since (U+1FA77 PINK HEART, CJK Extension H/I, new scripts) is in no class
for PCRE2 and splits differently. model/text/pcre2_regex.cc adds these code points to each
\\p{X} it compiles, so textgen's classes equal the library's.

How: the membership of every code point in each class is read from the library itself (a
Split pre-tokenizer on \\p{X}, run by node on all of U+0000..U+10FFFF), and compared with
Unicode 14.0 as /usr/bin/python3's unicodedata has it (Python 3.11: 14.0.0, the version of
PCRE2 10.42's tables). Additions are the library's members that 14.0 does not give the class;
members 14.0 gives the class but the library does not ("removals": a category changed) cannot
be expressed by adding and are listed in the file's comment. Output is deterministic.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import unicodedata

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(SOURCE_DIR, "model", "text", "unicode_class_additions.inc")
# Every general category and its one-letter group except C (control, format, unassigned)
# and Z, whose members (spaces) are fixed since long before 14.0.
CLASSES = ["L", "Lu", "Ll", "Lt", "Lm", "Lo", "M", "Mn", "Mc", "Me", "N", "Nd", "Nl", "No",
           "P", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "S", "Sm", "Sc", "Sk", "So"]

PROBE = r"""
const { Tokenizer } = require(process.argv[2]);
const classes = process.argv[3].split(',');
function splitter(regex) {
  // invert + Removed: what does not match is dropped, so the pieces left are the members.
  const j = {version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
    pre_tokenizer: {type: 'Split', pattern: {Regex: regex}, behavior: 'Removed', invert: true},
    post_processor: null, decoder: null,
    model: {type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null,
            end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, vocab: {a: 0},
            merges: []}};
  return Tokenizer.fromString(JSON.stringify(j)).getPreTokenizer();
}
const all = [];
for (let c = 0; c < 0x110000; c++) if (c < 0xD800 || c >= 0xE000) all.push(c);
const out = {};
for (const cls of classes) {
  const pre = splitter(`\\p{${cls}}`);
  const members = [];
  for (let i = 0; i < all.length; i += 20000) {
    const s = all.slice(i, i + 20000).map((c) => String.fromCodePoint(c)).join('');
    for (const [piece] of pre.preTokenizeString(s)) {
      for (const ch of piece) members.push(ch.codePointAt(0));
    }
  }
  out[cls] = members;
}
const version = require(require('path').join(process.argv[2], 'package.json')).version;
process.stdout.write(JSON.stringify({version, classes: out}));
"""


def ranges(code_points: list[int]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for c in sorted(code_points):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return [(a, b) for a, b in out]


def main() -> None:
    out_path = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_OUT
    if unicodedata.unidata_version != "14.0.0":
        raise SystemExit(f"run with /usr/bin/python3 (Python 3.11, Unicode 14.0.0); this one has "
                         f"{unicodedata.unidata_version}")
    package = os.path.join(SOURCE_DIR, "tests", "npm", "node_modules", "tokenizers")
    if not os.path.exists(os.path.join(package, "package.json")):
        raise SystemExit(f"{package} is missing: npm ci --prefix tests/npm")
    with tempfile.NamedTemporaryFile("w", suffix=".js", delete=False) as f:
        f.write(PROBE)
        script = f.name
    try:
        probed = json.loads(subprocess.run(["node", script, package, ",".join(CLASSES)],
                                           check=True, capture_output=True, text=True).stdout)
    finally:
        os.unlink(script)

    arrays, entries, removals, union = [], [], [], set()
    for cls in CLASSES:
        theirs = set(probed["classes"][cls])
        ours = {c for c in range(0x110000) if not 0xD800 <= c < 0xE000
                and unicodedata.category(chr(c)).startswith(cls)}
        union |= theirs - ours
        added = ranges(sorted(theirs - ours))
        removals += [f"U+{c:04X} leaves {cls} (14.0: {unicodedata.category(chr(c))})"
                     for c in sorted(ours - theirs)]
        if not added:
            entries.append(f'    {{"{cls}", {{}}}},')
            continue
        line = f"constexpr CodeRange k{cls}[] = {{" + ", ".join(
            f"{{0x{a:X}, 0x{b:X}}}" for a, b in added) + "};"
        # Wrapped at 100 columns.
        while len(line) > 100:
            cut = line.rfind("}, ", 0, 99) + 2
            arrays.append(line[:cut])
            line = "    " + line[cut + 1:]
        arrays.append(line)
        entries.append(f'    {{"{cls}", k{cls}}},')

    text = [
        "// Generated by tools/make_unicode_additions.py: do not edit.",
        f"// The code points Hugging Face's tokenizers {probed['version']} (Oniguruma, Unicode 16.0)",
        "// puts in each general category class and Unicode 14.0 (PCRE2 10.42's tables) does not:",
        f"// {len(union):,} code points, all assigned after 14.0 except where a category changed.",
        "// Category changes that adding cannot express: "
        + ("; ".join(removals) if removals else "none") + ".",
        "// clang-format off",
        *arrays,
        "constexpr ClassAdditions kClassAdditions[] = {",
        *entries,
        "};",
        "// clang-format on",
    ]
    with open(out_path, "w", encoding="utf-8") as f:
        f.write("\n".join(text) + "\n")
    total = len(union)
    print(f"wrote {out_path}: {total} code points over {len(CLASSES)} classes; "
          f"{len(removals)} category changes not expressed")


if __name__ == "__main__":
    main()
