"""Turn the installed Debian text packages into a deterministic document corpus.

Usage: python3 models/train/prepare_corpus.py models/train/data
(normally called by build_corpus.sh). Writes, under the data folder:
  corpus/train.jsonl, corpus/valid.jsonl  one JSON string (a document) per line
  words.txt     lowercase alphabetic words of /usr/share/dict/american-english
  glosses.jsonl [lemma, pos, short definition] from WordNet, for the synthetic dialogues
Every 50th document (in the fixed source order) goes to the held-out split.
"""
import gzip, json, os, re, sys

out = sys.argv[1]
docs = []  # (source, text)

# 1. WordNet glosses, 48 entries per document
POS = {"noun": "noun", "verb": "verb", "adj": "adjective", "adv": "adverb"}
glosses = []
for f, posname in POS.items():
    with open(f"/usr/share/wordnet/data.{f}", encoding="latin-1") as fh:
        for line in fh:
            if line.startswith("  ") or "|" not in line:
                continue
            head, gloss = line.split("|", 1)
            parts = head.split()
            nw = int(parts[3], 16)
            lemmas = [parts[4 + 2 * i].replace("_", " ") for i in range(nw)]
            lemmas = [re.sub(r"\(.*\)$", "", l) for l in lemmas]
            gloss = gloss.strip()
            d = gloss.split(";")[0].strip()
            if lemmas[0].isalpha() and lemmas[0].islower() and 8 <= len(d) <= 80 and '"' not in d:
                glosses.append((lemmas[0], posname, d))
            syn = ", ".join(lemmas)
            docs.append(("wordnet", f"{syn} ({posname}): {gloss}"))
wn = [d for d in docs]
docs = []
for i in range(0, len(wn), 48):
    docs.append(("wordnet", "\n".join(t for _, t in wn[i:i + 48])))

# 2. King James Bible, one chapter per document, verse references dropped
chap, cur = [], None
with open(os.path.join(out, "kjv_raw.txt"), encoding="utf-8") as fh:
    for line in fh:
        m = re.match(r"^(\d?[A-Za-z]+)(\d+):(\d+) (.*)$", line.rstrip("\n"))
        if not m:
            continue
        key = (m.group(1), m.group(2))
        if key != cur and chap:
            docs.append(("bible", " ".join(chap)))
            chap = []
        cur = key
        chap.append(m.group(4).strip())
if chap:
    docs.append(("bible", " ".join(chap)))

# 3. fortunes (the files of the 'fortunes' package), 16 fortunes per document
FORT = ["art", "computers", "cookie", "definitions", "disclaimer", "education", "ethnic", "food",
        "fortunes", "goedel", "humorists", "kids", "law", "linuxcookie", "literature", "love", "magic",
        "medicine", "men-women", "miscellaneous", "news", "people", "pets", "platitudes", "politics",
        "riddles", "science", "songs-poems", "sports", "startrek", "translate-me", "wisdom", "work",
        "zippy"]
for name in FORT:
    p = f"/usr/share/games/fortunes/{name}"
    if not os.path.exists(p):
        continue
    with open(p, encoding="utf-8", errors="replace") as fh:
        items = [t.strip("\n") for t in fh.read().split("\n%\n") if t.strip()]
    for i in range(0, len(items), 16):
        docs.append(("fortunes", "\n\n".join(items[i:i + 16])))

# 4. GNU manuals in info form, one node per document
INFO = ["coreutils.info.gz", "diffutils.info.gz", "find.info.gz", "find.info-1.gz", "find.info-2.gz",
        "grep.info.gz", "sed.info.gz", "gzip.info.gz", "bc.info.gz", "ed.info.gz", "time.info.gz",
        "wget.info.gz", "gettext.info.gz"]
for name in INFO:
    with gzip.open(f"/usr/share/info/{name}", "rt", encoding="utf-8", errors="replace") as fh:
        txt = fh.read()
    for node in txt.split("\x1f"):
        node = node.replace("\x7f", "").replace("\x00", "").replace("\x08", "")
        lines = node.strip("\n").split("\n")
        if lines and lines[0].startswith("File:"):
            lines = lines[1:]
        node = "\n".join(lines).strip()
        if len(node) < 200 or node.startswith("Tag Table:") or node.startswith("Indirect:"):
            continue
        docs.append(("info", node))

# 5. dictd dictionaries: GCIDE (Webster 1913 + additions) and FOLDOC; 32 entries per document
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def b64(s):
    v = 0
    for ch in s:
        v = v * 64 + B64.index(ch)
    return v


def dict_entries(name):
    with gzip.open(f"/usr/share/dictd/{name}.dict.dz", "rb") as fh:
        raw = fh.read()
    seen, ents = set(), []
    with open(f"/usr/share/dictd/{name}.index", encoding="utf-8") as fh:
        for line in fh:
            hw, off, ln = line.rstrip("\n").split("\t")[:3]
            if hw.startswith("00-database") or hw.startswith("00database"):
                continue
            o = b64(off)
            if o in seen:
                continue
            seen.add(o)
            ents.append((o, raw[o:o + b64(ln)].decode("utf-8", errors="replace")))
    ents.sort()
    return [e for _, e in ents]


def clean_gcide(e):
    e = re.sub(r"\\[^\\\n]*\\", "", e)                      # pronunciation \Ab*do"men\
    e = re.sub(r"\{([^{}]*)\}", r"\1", e)                        # {cross reference}
    e = re.sub(r"\s*\[(?:[^\]\n]*(?:Webster|PJC|WordNet|Century|Chambers|Sup\.|Supp\.)[^\]\n]*)\]", "", e)
    lines = [l.strip() for l in e.split("\n")]
    return "\n".join(l for l in lines if l).strip()


def clean_foldoc(e):
    e = re.sub(r"\{([^{}]*)\}", r"\1", e)                        # {cross reference}
    lines = [l.strip() for l in e.split("\n")]
    return "\n".join(l for l in lines if l).strip()


for name, clean, src in (("gcide", clean_gcide, "gcide"), ("foldoc", clean_foldoc, "foldoc")):
    ents = [t for t in (clean(e) for e in dict_entries(name)) if len(t) > 20]
    for i in range(0, len(ents), 32):
        docs.append((src, "\n\n".join(ents[i:i + 32])))

# 6. GNU coding standards and maintainer information (gnu-standards), one section per document
for name in ("standards", "maintain"):
    with gzip.open(f"/usr/share/doc/gnu-standards/{name}.text.gz", "rt", encoding="utf-8", errors="replace") as fh:
        txt = fh.read()
    for sec in re.split(r"\n(?=\d+(?:\.\d+)* [A-Z])", txt):
        sec = sec.strip()
        if len(sec) > 200:
            docs.append(("gnu-standards", sec))

os.makedirs(os.path.join(out, "corpus"), exist_ok=True)
stats = {}
with open(os.path.join(out, "corpus", "train.jsonl"), "w", encoding="utf-8") as ft, \
     open(os.path.join(out, "corpus", "valid.jsonl"), "w", encoding="utf-8") as fv:
    for i, (src, text) in enumerate(docs):
        f = fv if i % 50 == 49 else ft
        f.write(json.dumps(text, ensure_ascii=False) + "\n")
        s = stats.setdefault(src, [0, 0])
        s[0] += 1
        s[1] += len(text.encode("utf-8"))

with open("/usr/share/dict/american-english", encoding="utf-8") as fh:
    words = sorted({w.strip() for w in fh if re.fullmatch(r"[a-z]+", w.strip())})
with open(os.path.join(out, "words.txt"), "w") as fh:
    fh.write("\n".join(words) + "\n")
with open(os.path.join(out, "glosses.jsonl"), "w", encoding="utf-8") as fh:
    for g in glosses:
        fh.write(json.dumps(g, ensure_ascii=False) + "\n")
for src, (n, b) in stats.items():
    print(f"{src:10s} {n:7d} docs {b/1e6:8.2f} MB")
print(f"words {len(words)}  glosses {len(glosses)}")
