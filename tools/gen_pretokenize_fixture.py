#!/usr/bin/env python3
"""Generates tests/tokenizer/pretokenize_cases.txt: reference splits for the pre-tokenizers.

The reference is the third-party `regex` module running the split patterns verbatim (the
C++ side implements them by hand). Needs: pip install regex.

The regex module may ship a newer Unicode database than the one the C++ tables were generated
from (Python's unicodedata); every character used here is checked to be assigned in
unicodedata with the same L / N class in both, so the fixture does not depend on the version.

Format, one case per line (lines starting with '#' are comments):
    <kind> TAB <input as hex UTF-8> TAB <pieces as hex UTF-8, separated by single spaces>

Usage: python3 tools/gen_pretokenize_fixture.py [output path]
"""
import os
import random
import sys
import unicodedata

import regex

PATTERNS = {
    "gpt2": r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
    "llama3": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
              r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
             r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}

CASES = [
    "", " ", "  ", "\t", "a", "Hello world", "Hello, world!", "Hello  world  ",
    # contractions, in both cases and in odd places
    "I'm here", "I'M HERE", "you're we've she'll he'd it's don't",
    "YOU'RE WE'VE SHE'LL HE'D IT'S DON'T", "You'Re wE'vE sHe'Ll", "'s", "'S start", "''s",
    "'sweet 'llama 'dog 'tree", "rock'n'roll", "x'\u017f long s", "'re'", "' s", "it 's",
    "O'Neil's", "a'\u00e9", "'", "''", "'1", "'\u00a0x", "'\u017fx '\u017f",
    # digit runs 1..7 and other numbers
    "1", "12", "123", "1234", "12345", "123456", "1234567", "a1b22c333d4444e55555",
    " 42 and  7", "3.14159", "1,000,000", "\u0663\u0664\u0665\u0666", "x\u00b2\u00b3",
    "\u216b chapter", "\u00bd cup", "2024-01-02T03:04:05Z", "v1.2.3-rc4",
    # scripts
    "\u0393\u03b5\u03b9\u03ac \u03c3\u03bf\u03c5 \u039a\u03cc\u03c3\u03bc\u03b5",
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440!",
    "\u4f60\u597d\uff0c\u4e16\u754c", "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd", "\u0939\u093f\u0928\u094d\u0926\u0940",
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35",
    "emoji \U0001f600\U0001f44d\U0001f3fd family \U0001f468\u200d\U0001f469\u200d\U0001f467",
    "\U0001f1fa\U0001f1f8flags", "\ufb01 ligature", "\u01c5 titlecase \u02b0 modifier",
    "\u00c5ngstr\u00d6m", "\u2115 and \u211d",
    # combining marks
    "cafe\u0301", "e\u0301\u0301x", "\u0301start", " \u0301", "a \u0301b",
    # whitespace runs, CR LF, tabs, NBSP and friends
    "\r\n", "a\r\nb", "a\r\n\r\nb", "a \r\n b", "  \n  x", "trailing   ", "   leading",
    "a  b", "a\tb", "a\t\tb", "\t\n\t", "a \t b", "x\u00a0y", "x\u00a0\u00a0y", " \u00a0y",
    "\u3000\u5168\u89d2", "a\u2028b", "a\u0085b", "\x0b\x0cv", "a\r", "\n\n\nfoo", " \n",
    "end \n", "x \r\n\r\n  ", "\t\tx", "a\n b", "a \n\n", " \t\n \t", "\r\r\n\n",
    # punctuation runs
    "...!!!???", "a...b", " ...", "(hello)", "[x]", "#include <stdio.h>", "foo()\n\n",
    "x = y + z;\r\n", "--->\n\n", "\"quoted\"", "a' b", "' ", "$100.00", "@user #tag",
    "<|endoftext|>", "http://example.com/path?q=1&r=2", "\u201csmart quotes\u201d",
    "\u2014em dash\u2014", "_underscore_", "snake_case_var", "!a", " !a", "\t!a", ".\n\nx",
    # code
    "def f(x):\n    return x**2\n", "    indented\n\tline", "if (a&&b) {\n  c();\n}\n",
    # control characters (not White_Space)
    "\x00\x01a", "\x1c\x1d x", "a\x7fb",
]

# Random strings over an alphabet chosen to hit every alternative and their interactions.
ALPHABET = [
    "a", "Z", " ", " ", "\t", "\n", "\r", "'", "s", "S", "l", "L", "e", "E", "r", "v", "d",
    "m", "t", "1", "2", ".", "!", "\u00e9", "\u03b1", "\u4e2d", "\U0001f600", "\u0301",
    "\u00a0", "\u0663", "_", "\u017f", "\u00b2", "\u3000",
]


def check_chars(strings):
    for s in strings:
        for ch in s:
            cat = unicodedata.category(ch)
            if cat == "Cn":
                sys.exit("U+%04X is unassigned in Python's Unicode %s" %
                         (ord(ch), unicodedata.unidata_version))
            if (bool(regex.match(r"\p{L}", ch)) != (cat[0] == "L") or
                    bool(regex.match(r"\p{N}", ch)) != (cat[0] == "N")):
                sys.exit("U+%04X: regex and unicodedata disagree on its class" % ord(ch))


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        root, "tests", "tokenizer", "pretokenize_cases.txt")

    rng = random.Random(20240611)
    randoms = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 16)))
               for _ in range(150)]
    strings = CASES + randoms
    check_chars(strings)

    lines = [
        "# GENERATED by tools/gen_pretokenize_fixture.py; do not edit.",
        "# Reference: the Python regex module (%s) on the split patterns below." %
        regex.__version__,
        "# Characters are restricted to Unicode %s (both sides agree on them)." %
        unicodedata.unidata_version,
    ]
    for kind, pattern in PATTERNS.items():
        lines.append("# %s: %s" % (kind, pattern))
    lines.append("# <kind> TAB <input hex> TAB <piece hex> <piece hex> ...")
    for kind, pattern in PATTERNS.items():
        compiled = regex.compile(pattern)
        for s in strings:
            pieces = compiled.findall(s)
            if "".join(pieces) != s:
                sys.exit("%s: pieces of %r do not tile it" % (kind, s))
            lines.append("# %s" % ascii(s))
            lines.append("%s\t%s\t%s" % (kind, s.encode("utf-8").hex(),
                                         " ".join(p.encode("utf-8").hex() for p in pieces)))
    with open(out_path, "w", encoding="ascii", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s: %d cases" % (out_path, len(strings) * len(PATTERNS)))


if __name__ == "__main__":
    main()
