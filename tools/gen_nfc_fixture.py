#!/usr/bin/env python3
"""Generates tests/tokenizer/nfc_cases.txt: strings and their NFC and NFD forms as Python's
unicodedata.normalize() gives them, the reference the SDK's normalizer is tested against.

Run it with the same Python (so the same Unicode version) as tools/gen_unicode_nfc.py; the
fixture records the version.

Cases:
  - every character with a canonical decomposition, alone and as its NFD form (so composition
    back, and the composition exclusions, are tested), a few to a line;
  - every character with a non-zero combining class after a base letter, and between two
    others of different classes (canonical ordering);
  - Hangul: syllables, and jamo sequences that compose fully, partly or not at all;
  - random sequences of bases, precomposed characters, singletons and combining marks of many
    classes, including the starters that compose with what precedes them (Indic two-part
    vowels, Hangul vowel and trailing jamo) and characters beyond the BMP.

Format, one case per line (lines starting with '#' are comments):
    <input as hex UTF-8> TAB <NFC as hex UTF-8> TAB <NFD as hex UTF-8>
where "=" stands for a form that is the input itself.

Usage: python3 tools/gen_nfc_fixture.py [output path]
"""
import os
import random
import sys
import unicodedata

# Bases, precomposed letters, singletons (U+212B ANGSTROM SIGN, U+2126 OHM SIGN, U+212A KELVIN
# SIGN, U+0340, U+0374), excluded composites (U+0958, U+FB2A), non-starter decompositions
# (U+0344, U+0F73), and starters that take part in compositions.
BASES = [0x41, 0x61, 0x45, 0x65, 0x4F, 0x6F, 0x55, 0x75, 0x53, 0x73, 0x3C, 0x3D, 0x20, 0xC5,
         0xE9, 0x1D6, 0x1E0B, 0x1E63, 0x391, 0x3B1, 0x3C9, 0x1F00, 0x415, 0x439, 0x212B, 0x2126,
         0x212A, 0x340, 0x374, 0x958, 0x915, 0x928, 0xFB2A, 0x5E9, 0x344, 0xF73, 0xF40, 0x9C7,
         0x9BE, 0x9D7, 0x9CB, 0xB47, 0xB3E, 0xB56, 0xB57, 0xBC6, 0xBBE, 0xBD7, 0xCBF, 0xCC6,
         0xCC2, 0xCD5, 0xCD6, 0xD46, 0xD3E, 0xD57, 0xDD9, 0xDCF, 0xDDF, 0x1025, 0x102E, 0x1B05,
         0x1B35, 0x304B, 0x306F, 0x30AB, 0x1100, 0x1112, 0x1161, 0x1175, 0x11A7, 0x11A8, 0x11C2,
         0x11C3, 0xAC00, 0xAC01, 0xD7A3, 0x3131, 0x11099, 0x110BA, 0x11131, 0x11127, 0x11347,
         0x1133E, 0x11357, 0x114B9, 0x114B0, 0x11935, 0x11930, 0x1D157, 0x1D165, 0x4E2D, 0xFFFD]
# Combining marks of many classes (1, 7, 9, 202, 216, 220, 222, 228, 230, 232, 233, 234, 240,
# fixed-position Hebrew/Arabic/Thai/Tibetan classes, kana voicing marks 8).
MARKS = [0x300, 0x301, 0x302, 0x303, 0x304, 0x306, 0x307, 0x308, 0x30A, 0x30C, 0x313, 0x314,
         0x315, 0x31B, 0x323, 0x325, 0x327, 0x328, 0x32D, 0x334, 0x338, 0x342, 0x345, 0x35C,
         0x35D, 0x5B0, 0x5B4, 0x5BC, 0x5C1, 0x64B, 0x651, 0x670, 0x93C, 0x94D, 0x9BC, 0x9CD,
         0xE38, 0xE48, 0xF71, 0xF72, 0xF74, 0xF80, 0x1DCE, 0x20D2, 0x20DB, 0x302A, 0x302E,
         0x3099, 0x309A, 0x1D165, 0x1D16D, 0x1D16E, 0x110BA, 0x1E94A]


def hexs(s):
    return s.encode("utf-8").hex()


def case(s):
    forms = [unicodedata.normalize(f, s) for f in ("NFC", "NFD")]
    return "\t".join([hexs(s)] + ["=" if f == s else hexs(f) for f in forms])


def grouped(strings, per_line):
    """Strings joined a few to a line by a space (a starter that composes with nothing)."""
    return [" ".join(strings[i:i + per_line]) for i in range(0, len(strings), per_line)]


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        root, "tests", "tokenizer", "nfc_cases.txt")
    rng = random.Random(18)
    texts = []

    decomposable = [chr(cp) for cp in range(0x110000)
                    if unicodedata.decomposition(chr(cp))
                    and not unicodedata.decomposition(chr(cp)).startswith("<")]
    texts += grouped(decomposable, 8)
    texts += grouped([unicodedata.normalize("NFD", c) for c in decomposable], 8)

    marks = [chr(cp) for cp in range(0x110000) if unicodedata.combining(chr(cp))]
    texts += grouped(["a" + m for m in marks], 8)
    # Each mark between two marks of other classes, after a letter that composes with some.
    for m in marks:
        a, b = rng.sample(MARKS, 2)
        texts.append(rng.choice("aeouAEOUs") + chr(a) + m + chr(b))

    # Hangul: a sample of syllables alone, and jamo sequences of every shape.
    texts += grouped([chr(cp) for cp in range(0xAC00, 0xD7A4, 37)], 8)
    jamo_l = [0x1100, 0x1109, 0x1112, 0x1113]  # U+1113 is no modern leading consonant
    jamo_v = [0x1161, 0x116E, 0x1175, 0x1176]  # nor U+1176 a modern vowel
    jamo_t = [0x11A7, 0x11A8, 0x11AF, 0x11C2, 0x11C3]  # U+11A7 and U+11C3 compose with nothing
    for _ in range(200):
        parts = []
        for _ in range(rng.randint(1, 4)):
            shape = rng.choice(["LV", "LVT", "L", "V", "T", "SV", "ST", "LT", "VT", "LL", "LVTT"])
            for k in shape:
                if k == "L":
                    parts.append(rng.choice(jamo_l))
                elif k == "V":
                    parts.append(rng.choice(jamo_v))
                elif k == "T":
                    parts.append(rng.choice(jamo_t))
                else:
                    parts.append(rng.choice([0xAC00, 0xAC01, 0xB098, 0xD7A3, 0xC544]))
        texts.append("".join(chr(c) for c in parts))

    # Random mixtures.
    for _ in range(800):
        n = rng.randint(1, 10)
        texts.append("".join(chr(rng.choice(MARKS) if rng.random() < 0.45 else rng.choice(BASES))
                             for _ in range(n)))

    lines = ["# GENERATED by tools/gen_nfc_fixture.py from Unicode %s (Python unicodedata); "
             "do not edit." % unicodedata.unidata_version,
             "# <input hex> TAB <NFC hex> TAB <NFD hex>, all UTF-8; '=': the same as the input"]
    lines += [case(t) for t in texts]
    with open(out_path, "w", encoding="ascii", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s: %d cases, Unicode %s" % (out_path, len(texts), unicodedata.unidata_version))


if __name__ == "__main__":
    main()
