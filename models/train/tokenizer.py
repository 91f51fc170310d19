"""Byte-level BPE tokenizer of the sa default model (GGUF 'gpt2' model, 'qwen2' pre-tokenizer).

Encoding = split out control tokens literally, pre-tokenize the rest with the qwen2 regex,
map each pre-token's UTF-8 bytes to the GPT-2 byte->unicode alphabet, then repeatedly merge
the adjacent pair of lowest merge rank (all its occurrences, left to right) until none applies.
"""
import json
import regex

PRETOKENIZE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
PAT = regex.compile(PRETOKENIZE)
SPECIALS = ["<s>", "</s>", "<|im_start|>", "<|im_end|>", "<pad>"]  # ids 0..4, control tokens
BOS, EOS, IM_START, IM_END, PAD = 0, 1, 2, 3, 4
N_SPECIAL = len(SPECIALS)


def bytes_to_unicode():
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


B2U = bytes_to_unicode()
U2B = {v: k for k, v in B2U.items()}


def to_mapped(bs: bytes) -> str:
    return "".join(B2U[b] for b in bs)


class Tokenizer:
    def __init__(self, tokens, merges):
        self.tokens = tokens  # mapped strings, index = id
        self.merges = merges  # list of (left, right) mapped strings
        self.tok2id = {t: i for i, t in enumerate(tokens)}
        self.rank = {m: i for i, m in enumerate(merges)}
        self.cache = {}
        self.special_re = regex.compile("|".join(regex.escape(s) for s in SPECIALS))

    @classmethod
    def load(cls, path):
        with open(path, encoding="utf-8") as fh:
            d = json.load(fh)
        return cls(d["tokens"], [tuple(m.split(" ")) for m in d["merges"]])

    def save(self, path):
        with open(path, "w", encoding="utf-8") as fh:
            json.dump({"tokens": self.tokens, "merges": [f"{a} {b}" for a, b in self.merges],
                       "specials": SPECIALS, "pretokenizer": PRETOKENIZE}, fh, ensure_ascii=False)

    @property
    def n_vocab(self):
        return len(self.tokens)

    def bpe(self, piece: str):
        ids = self.cache.get(piece)
        if ids is not None:
            return ids
        syms = [B2U[b] for b in piece.encode("utf-8")]
        rank = self.rank
        while len(syms) > 1:
            best, bi = None, -1
            for i in range(len(syms) - 1):
                r = rank.get((syms[i], syms[i + 1]))
                if r is not None and (best is None or r < best):
                    best, bi = r, i
            if best is None:
                break
            a, b = syms[bi], syms[bi + 1]
            out, i = [], 0
            while i < len(syms):
                if i < len(syms) - 1 and syms[i] == a and syms[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(syms[i])
                    i += 1
            syms = out
        ids = [self.tok2id[s] for s in syms]
        self.cache[piece] = ids
        return ids

    def encode_ordinary(self, text: str):
        out = []
        for p in PAT.findall(text):
            out.extend(self.bpe(p))
        return out

    def encode(self, text: str, add_bos=False, parse_special=True):
        out = [BOS] if add_bos else []
        if not parse_special:
            return out + self.encode_ordinary(text)
        pos = 0
        for m in self.special_re.finditer(text):
            out.extend(self.encode_ordinary(text[pos:m.start()]))
            out.append(SPECIALS.index(m.group(0)))
            pos = m.end()
        out.extend(self.encode_ordinary(text[pos:]))
        return out

    def decode(self, ids):
        bs = bytearray()
        for i in ids:
            t = self.tokens[i]
            if i < N_SPECIAL:
                bs.extend(t.encode("utf-8"))
            else:
                bs.extend(U2B[c] for c in t)
        return bs.decode("utf-8", errors="replace")
