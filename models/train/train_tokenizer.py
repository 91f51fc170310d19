"""Train the byte-level BPE (vocab 4096) on the corpus and tokenize the corpus.

Usage: python3 models/train/train_tokenizer.py models/train/data [vocab_size]
Writes data/tokenizer.json, data/train.u16, data/valid.u16 (uint16 token streams; each
document is <s> text </s>). Deterministic: ties between equally frequent pairs are broken by
the pair's byte strings (smallest first).
"""
import heapq, json, os, sys, time
from collections import Counter, defaultdict
import numpy as np
from tokenizer import PAT, SPECIALS, B2U, Tokenizer, BOS, EOS, to_mapped

data = sys.argv[1]
vocab_size = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
t0 = time.time()
docs = [json.loads(l) for l in open(os.path.join(data, "corpus", "train.jsonl"), encoding="utf-8")]
freq = Counter()
for d in docs:
    freq.update(PAT.findall(d))
print(f"{len(docs)} docs, {len(freq)} unique pre-tokens ({time.time()-t0:.1f}s)", flush=True)

# symbols are byte strings; words are lists of symbols
words = [[bytes([b]) for b in w.encode("utf-8")] for w in freq]
counts = list(freq.values())
pair_cnt = defaultdict(int)
where = defaultdict(set)
for wi, w in enumerate(words):
    c = counts[wi]
    for a, b in zip(w, w[1:]):
        pair_cnt[(a, b)] += c
        where[(a, b)].add(wi)
heap = [(-c, p) for p, c in pair_cnt.items()]
heapq.heapify(heap)
n_merges = vocab_size - len(SPECIALS) - 256
merges = []
while len(merges) < n_merges and heap:
    negc, p = heapq.heappop(heap)
    if pair_cnt.get(p, 0) != -negc or -negc <= 0:
        continue  # stale entry
    a, b = p
    ab = a + b
    merges.append(p)
    changed = defaultdict(int)
    for wi in list(where[p]):
        w = words[wi]
        c = counts[wi]
        i, out = 0, []
        hit = False
        while i < len(w):
            if i < len(w) - 1 and w[i] == a and w[i + 1] == b:
                out.append(ab); i += 2; hit = True
            else:
                out.append(w[i]); i += 1
        if not hit:
            continue
        for x, y in zip(w, w[1:]):
            pair_cnt[(x, y)] -= c
            changed[(x, y)] += 0
        for x, y in zip(out, out[1:]):
            pair_cnt[(x, y)] += c
            where[(x, y)].add(wi)
            changed[(x, y)] += 0
        words[wi] = out
    del where[p]
    pair_cnt.pop(p, None)
    for q in changed:
        c = pair_cnt.get(q, 0)
        if c > 0:
            heapq.heappush(heap, (-c, q))
        else:
            pair_cnt.pop(q, None)
print(f"{len(merges)} merges ({time.time()-t0:.1f}s)", flush=True)

tokens = list(SPECIALS) + [B2U[b] for b in range(256)]
mmerges = []
for a, b in merges:
    mmerges.append((to_mapped(a), to_mapped(b)))
    tokens.append(to_mapped(a + b))
assert len(set(tokens)) == len(tokens)
tok = Tokenizer(tokens, mmerges)
# every digit its own token: no token (other than a byte) may contain a decimal digit
for i, t in enumerate(tokens[len(SPECIALS) + 256:], len(SPECIALS) + 256):
    s = tok.decode([i])
    assert not any(ch.isdigit() for ch in s), (i, s)
tok.save(os.path.join(data, "tokenizer.json"))

for split in ("train", "valid"):
    ds = docs if split == "train" else [json.loads(l) for l in open(os.path.join(data, "corpus", "valid.jsonl"), encoding="utf-8")]
    ids = []
    for d in ds:
        ids.append(BOS)
        ids.extend(tok.encode_ordinary(d))
        ids.append(EOS)
    arr = np.array(ids, dtype=np.uint16)
    arr.tofile(os.path.join(data, f"{split}.u16"))
    nbytes = sum(len(d.encode("utf-8")) for d in ds)
    print(f"{split}: {len(arr)} tokens, {nbytes/len(arr):.2f} bytes/token ({time.time()-t0:.1f}s)", flush=True)
