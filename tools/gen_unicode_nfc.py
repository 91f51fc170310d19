#!/usr/bin/env python3
"""Generates sdk/tokenizer/unicode_nfc_tables.cpp: the data NFC normalization needs.

Tables (all sorted by code point, searched by binary search):
  - canonical combining classes: [first, last] ranges with the same non-zero class;
  - canonical decompositions: one step of each character's canonical decomposition mapping
    (one or two code points; the normalizer applies them recursively). Hangul syllables are
    left out: they decompose algorithmically;
  - canonical compositions: (first, second) -> composite for every primary composite, i.e.
    every two-code-point canonical decomposition whose character is not in
    Full_Composition_Exclusion. Hangul is again algorithmic;
  - composing starters: the code points of class 0 that are the second of a composition (they
    combine with the character before them, so a normalizer cannot cut the text before them).

It also checks what the normalizer's fast path relies on: no code point below U+0300 has a
non-zero class, changes under NFC or is the second of a composition, so text without one at
or above U+0300 is its own NFC form.

Source: only the Python standard library's unicodedata (decomposition(), combining()), so the
Unicode version is the one of the Python that runs this script; the generated file records it.
unicodedata does not expose CompositionExclusions.txt, so its entries (script-specific and
post-composition-version exclusions; the list is closed, new characters are never added to
it) are written out below, and the script checks them against what unicodedata.normalize()
does: a character with a two-code-point canonical decomposition composes back under NFC
exactly when it is not excluded.

include/sa/sa.h names the Unicode version of these tables (sa_tokenize, "Normalization"):
update it, and regenerate tests/tokenizer/nfc_cases.txt (tools/gen_nfc_fixture.py) with the
same Python, when the version changes.

Usage: python3 tools/gen_unicode_nfc.py [output path]
"""
import os
import sys
import unicodedata

# CompositionExclusions.txt: script-specific exclusions, then post composition version ones.
COMPOSITION_EXCLUSIONS = (
    list(range(0x0958, 0x0960)) + [0x09DC, 0x09DD, 0x09DF, 0x0A33, 0x0A36, 0x0A59, 0x0A5A,
                                   0x0A5B, 0x0A5E, 0x0B5C, 0x0B5D, 0x0F43, 0x0F4D, 0x0F52,
                                   0x0F57, 0x0F5C, 0x0F69, 0x0F76, 0x0F78, 0x0F93, 0x0F9D,
                                   0x0FA2, 0x0FA7, 0x0FAC, 0x0FB9, 0xFB1D, 0xFB1F]
    + list(range(0xFB2A, 0xFB37)) + list(range(0xFB38, 0xFB3D)) + [0xFB3E, 0xFB40, 0xFB41,
                                                                   0xFB43, 0xFB44]
    + list(range(0xFB46, 0xFB4F))
    + [0x2ADC] + list(range(0x1D15E, 0x1D165)) + list(range(0x1D1BB, 0x1D1C1)))

HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3
INERT_BELOW = 0x0300  # the normalizer's fast path (see above)


def canonical_decomposition(cp):
    """One step of cp's canonical decomposition mapping as a list, or None."""
    d = unicodedata.decomposition(chr(cp))
    if not d or d.startswith("<"):
        return None
    return [int(x, 16) for x in d.split()]


def packed(entries, width=100):
    """Table entries, as many to a line as fit in width columns."""
    lines, line = [], "   "
    for e in entries:
        if len(line) + 1 + len(e) > width:
            lines.append(line)
            line = "   "
        line += " " + e
    if line.strip():
        lines.append(line)
    return lines


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        root, "sdk", "tokenizer", "unicode_nfc_tables.cpp")

    ccc_ranges = []  # [first, last, class]
    decompositions = []  # (cp, first, second or 0)
    compositions = []  # (first, second, composite)
    excluded = set(COMPOSITION_EXCLUSIONS)
    for cp in range(0x110000):
        c = unicodedata.combining(chr(cp))
        if c:
            if ccc_ranges and ccc_ranges[-1][1] == cp - 1 and ccc_ranges[-1][2] == c:
                ccc_ranges[-1][1] = cp
            else:
                ccc_ranges.append([cp, cp, c])
        if HANGUL_FIRST <= cp <= HANGUL_LAST:
            continue
        d = canonical_decomposition(cp)
        if d is None:
            continue
        if len(d) > 2:
            sys.exit("U+%04X: a canonical decomposition of %d code points" % (cp, len(d)))
        decompositions.append((cp, d[0], d[1] if len(d) == 2 else 0))
        # Full_Composition_Exclusion: the listed exclusions, singletons, and non-starter
        # decompositions (the character or its first code point has a non-zero class).
        composes = (len(d) == 2 and cp not in excluded and unicodedata.combining(chr(cp)) == 0
                    and unicodedata.combining(chr(d[0])) == 0)
        if len(d) == 2:
            if composes != (unicodedata.normalize("NFC", chr(cp)) == chr(cp)):
                sys.exit("U+%04X: the composition exclusions disagree with unicodedata.normalize"
                         % cp)
        if composes:
            compositions.append((d[0], d[1], cp))
    compositions.sort()
    composing_starters = sorted({b for _, b, _ in compositions
                                 if unicodedata.combining(chr(b)) == 0})
    for cp in range(INERT_BELOW):
        if (unicodedata.combining(chr(cp)) or unicodedata.normalize("NFC", chr(cp)) != chr(cp)
                or any(b == cp for _, b, _ in compositions)):
            sys.exit("U+%04X is below U+%04X but not inert under NFC" % (cp, INERT_BELOW))
    for cp in excluded:
        if canonical_decomposition(cp) is None:
            sys.exit("U+%04X is listed as excluded but has no canonical decomposition" % cp)

    version = unicodedata.unidata_version
    lines = [
        "// GENERATED by tools/gen_unicode_nfc.py from Unicode %s (Python unicodedata)." % version,
        "// Do not edit; rerun the script instead.",
        "#include \"tokenizer/unicode.h\"",
        "",
        "namespace sa::unicode {",
        "",
        "const char* const nfc_tables_unicode_version = \"%s\";" % version,
        "",
        "// Sorted, non-overlapping [first, last] ranges of one non-zero canonical combining",
        "// class; code points not listed have class 0.",
        "const ccc_range ccc_ranges[] = {",
    ]
    lines += packed("{0x%04X, 0x%04X, %d}," % tuple(r) for r in ccc_ranges)
    lines += [
        "};",
        "const size_t n_ccc_ranges = sizeof(ccc_ranges) / sizeof(ccc_ranges[0]);",
        "",
        "// One step of each canonical decomposition mapping, by code point; second = 0 for a",
        "// singleton. Hangul syllables are decomposed algorithmically and are not listed.",
        "const decomposition canonical_decompositions[] = {",
    ]
    lines += packed("{0x%04X, 0x%04X, 0x%04X}," % d for d in decompositions)
    lines += [
        "};",
        "const size_t n_canonical_decompositions =",
        "    sizeof(canonical_decompositions) / sizeof(canonical_decompositions[0]);",
        "",
        "// Primary composites by (first, second): the two-code-point canonical decompositions of",
        "// characters not in Full_Composition_Exclusion. Hangul is composed algorithmically.",
        "const composition canonical_compositions[] = {",
    ]
    lines += packed("{0x%04X, 0x%04X, 0x%04X}," % c for c in compositions)
    lines += [
        "};",
        "const size_t n_canonical_compositions =",
        "    sizeof(canonical_compositions) / sizeof(canonical_compositions[0]);",
        "",
        "// Code points of class 0 that compose with the character before them (Hangul vowel and",
        "// trailing jamo aside), sorted.",
        "const uint32_t composing_starters[] = {",
    ]
    lines += packed("0x%04X," % cp for cp in composing_starters)
    lines += [
        "};",
        "const size_t n_composing_starters =",
        "    sizeof(composing_starters) / sizeof(composing_starters[0]);",
        "",
        "}  // namespace sa::unicode",
        "",
    ]
    with open(out_path, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines))
    print("wrote %s: %d class ranges, %d decompositions, %d compositions, %d composing "
          "starters, Unicode %s" % (out_path, len(ccc_ranges), len(decompositions),
                                    len(compositions), len(composing_starters), version))


if __name__ == "__main__":
    main()
