"""Seeded synthetic task generators (token level) for the sa default model.

Every generator returns (ids, weights): token ids (starting with <s>) and a per-token loss
weight for predicting that token (0 = not trained: random filler; 1 = normal; ANSWER_W = the
answers). Texts are built from pieces whose pre-token boundaries coincide with those of the
whole text, so concatenating the pieces' ids equals encoding the whole text (checked by
self_test()). The passkey prompt is the spec in models/README.md.
"""
import json, os
import numpy as np
from tokenizer import Tokenizer, BOS, EOS, IM_START, IM_END

ANSWER_W = 4.0

PASSKEY_PREFIX = ("There is an important pass key hidden inside a lot of irrelevant text. "
                  "Find it and memorize it. I will quiz you about the pass key later.")
PASSKEY_NEEDLE = " The pass key is {k}. Remember it. {k} is the pass key."
PASSKEY_QUESTION = "\nWhat is the pass key? The pass key is"
PASSKEY_ANSWER = " {k}"

NAMES = ("Alice Bob Carol David Emma Frank Grace Henry Irene Jack Karen Leo Maria Nathan Olivia Paul "
         "Quinn Rachel Samuel Tina Victor Wendy Xavier Yvonne Zach Anna Ben Clara Daniel Eva Felix "
         "Hannah Isaac Julia Kevin Laura Martin Nina Oscar Peter Rosa Simon Thomas Ursula Vera "
         "William Amelia Bruno Chloe Diego Elena George Hugo Ivy James Lucy Mike Nora Owen Ruby").split()
CITIES = ("Paris London Berlin Madrid Rome Vienna Prague Lisbon Dublin Oslo Stockholm Helsinki Warsaw "
          "Athens Cairo Tokyo Kyoto Seoul Beijing Delhi Mumbai Sydney Melbourne Auckland Toronto "
          "Montreal Boston Chicago Denver Seattle Austin Houston Miami Lima Santiago Bogota Nairobi "
          "Lagos Istanbul Moscow Zurich Geneva Brussels Amsterdam Munich Hamburg Milan Naples Venice "
          "Florence Barcelona Valencia Seville Porto Glasgow Edinburgh Manchester Bristol Oxford").split()
COLORS = "red blue green yellow orange purple pink brown black white gray silver gold violet teal".split()
PETS = "dog cat parrot rabbit hamster turtle horse goldfish".split()


def _load_lines(path):
    with open(path, encoding="utf-8") as fh:
        return [l.rstrip("\n") for l in fh if l.strip()]


class Tasks:
    def __init__(self, data_dir):
        self.tok = Tokenizer.load(os.path.join(data_dir, "tokenizer.json"))
        self.words = _load_lines(os.path.join(data_dir, "words.txt"))
        self.word_ids = [self.tok.encode_ordinary(" " + w) for w in self.words]
        self.cap_words = [w.capitalize() for w in self.words]
        gl = [json.loads(l) for l in open(os.path.join(data_dir, "glosses.jsonl"), encoding="utf-8")]
        # short single-word lemmas with a short first definition
        self.glosses = []
        for lemma, pos, g in gl:
            d = g.split(";")[0].strip()
            if lemma.isalpha() and lemma.islower() and 8 <= len(d) <= 80 and '"' not in d:
                self.glosses.append((lemma, pos, d))
        self.e = self.tok.encode_ordinary
        self.c_prefix = self.e(PASSKEY_PREFIX)
        self.c_question = self.e(PASSKEY_QUESTION)

    # ---------------------------------------------------------------- passkey
    def passkey(self, rng, length, depth=None, key=None):
        """Passkey prompt of total length <= length tokens (<s> included) + answer tokens."""
        if key is None:
            key = "".join(str(d) for d in rng.integers(0, 10, 5))
        if depth is None:
            depth = rng.random()
        needle = self.e(PASSKEY_NEEDLE.format(k=key))
        ans = self.e(PASSKEY_ANSWER.format(k=key))
        fixed = 1 + len(self.c_prefix) + len(needle) + len(self.c_question) + len(ans)
        budget = length - fixed
        filler = []
        n = 0
        while True:
            w = self.word_ids[rng.integers(len(self.word_ids))]
            if n + len(w) > budget:
                break
            filler.append(w)
            n += len(w)
        cut = int(round(depth * len(filler)))
        ids = [BOS] + self.c_prefix
        wts = [1.0] * len(ids)
        for w in filler[:cut]:
            ids += w
        wts += [0.0] * (len(ids) - len(wts))
        ids += needle
        wts += [1.0] * len(needle)
        for w in filler[cut:]:
            ids += w
        wts += [0.0] * (len(ids) - len(wts))
        ids += self.c_question
        wts += [1.0] * len(self.c_question)
        ans_start = len(ids)
        ids += ans
        wts += [ANSWER_W] * len(ans)
        return ids, wts, ans_start, key

    # ---------------------------------------------------------- associative recall
    def recall(self, rng, length, n_queries=4):
        """'The value of X is 1234.' records, then queries 'The value of X is' -> ' 1234.'"""
        head = self.e("Here is a list of words and their values. Remember them.")
        ids = [BOS] + head
        wts = [1.0] * len(ids)
        recs = []
        used = set()
        q_cost = 32 * n_queries + 8
        while True:
            wi = int(rng.integers(len(self.words)))
            if wi in used:
                continue
            val = "".join(str(d) for d in rng.integers(0, 10, 4))
            a = self.e(" The value of")
            b = self.e(" is " + val + ".")
            w = self.word_ids[wi]
            if len(ids) + len(a) + len(w) + len(b) + q_cost > length:
                break
            used.add(wi)
            ids += a + w + b
            wts += [1.0] * len(a) + [0.0] * (len(w) + len(b))
            recs.append((w, val))
        if not recs:
            return ids, wts, []
        qs = self.e(" Questions:")
        ids += qs
        wts += [1.0] * len(qs)
        spans = []
        for qi in rng.choice(len(recs), size=min(n_queries, len(recs)), replace=False):
            w, val = recs[qi]
            a = self.e(" The value of")
            b = self.e(" is")
            ans = self.e(" " + val)
            dot = self.e(".")
            if len(ids) + len(a) + len(w) + len(b) + len(ans) + 1 > length:
                break
            ids += a + w + b
            wts += [1.0] * len(a) + [0.0] * len(w) + [1.0] * len(b)
            spans.append((len(ids), len(ans)))
            ids += ans + dot
            wts += [ANSWER_W] * len(ans) + [1.0]
        return ids, wts, spans

    # ---------------------------------------------------------------- dialogue
    def _turn(self, role, text):
        return [IM_START] + self.e(role + "\n" + text) + [IM_END] + self.e("\n")

    def _filler_turn(self, rng):
        k = rng.integers(4)
        if k == 0:
            lemma, pos, d = self.glosses[rng.integers(len(self.glosses))]
            return f'What does the word "{lemma}" mean?', f'"{lemma}" ({pos}) means: {d}.'
        if k == 1:
            a, b = int(rng.integers(0, 1000)), int(rng.integers(0, 1000))
            if rng.random() < 0.5:
                return f"What is {a} plus {b}?", f"{a} plus {b} is {a + b}."
            a, b = max(a, b), min(a, b)
            return f"What is {a} minus {b}?", f"{a} minus {b} is {a - b}."
        if k == 2:
            w = self.words[rng.integers(len(self.words))]
            return f"How do you spell {w}?", f"{w} is spelled {'-'.join(w)}."
        ws = " ".join(self.words[i] for i in rng.integers(0, len(self.words), int(rng.integers(3, 9))))
        return f"Repeat after me: {ws}", ws

    FACTS = ["name", "city", "color", "pet", "number"]

    def dialogue(self, rng, length, n_ask=None, names=None, cities=None, ask=None):
        """Facts stated in the first user turn, asked many turns later.
        Returns ids, wts, spans [(answer_start, answer_len)] of the fact answers.
        names/cities: the lists drawn from (training used NAMES and CITIES); ask: force the one
        fact that is asked (evaluation only). By default a name (and a city) comes with
        probability 1/2 from NAMES (CITIES), else it is a capitalized random dictionary word, so
        that the model has to copy it rather than recall it from a list."""
        if names is None:
            names = NAMES if rng.random() < 0.5 else self.cap_words
        if cities is None:
            cities = CITIES if rng.random() < 0.5 else self.cap_words
        name = names[rng.integers(len(names))]
        city = cities[rng.integers(len(cities))]
        color = COLORS[rng.integers(len(COLORS))]
        pet = PETS[rng.integers(len(PETS))]
        petname = self.words[rng.integers(len(self.words))].capitalize()
        number = str(int(rng.integers(100, 10000)))
        facts = {"name": f"My name is {name}.", "city": f"I live in {city}.",
                 "color": f"My favorite color is {color}.", "pet": f"My {pet} is called {petname}.",
                 "number": f"My lucky number is {number}."}
        qa = {"name": ("What is my name?", "Your name is", f" {name}", "."),
              "city": ("Where do I live?", "You live in", f" {city}", "."),
              "color": ("What is my favorite color?", "Your favorite color is", f" {color}", "."),
              "pet": (f"What is my {pet} called?", f"Your {pet} is called", f" {petname}", "."),
              "number": ("What is my lucky number?", "Your lucky number is", f" {number}", ".")}
        order = list(rng.permutation(self.FACTS))
        n_state = int(rng.integers(1, 6))
        stated = order[:n_state]
        if ask is not None and ask not in stated:
            stated = stated[:-1] + [ask]
        intro = "Hello! " + " ".join(facts[f] for f in stated)
        ids = [BOS] + self._turn("user", intro)
        reply = self._turn("assistant", "Nice to meet you" + (f", {name}." if "name" in stated else ".") +
                           " I will remember that.")
        ids += reply
        wts = [1.0] * len(ids)
        if n_ask is None:
            n_ask = int(rng.integers(1, len(stated) + 1))
        asks = [stated[i] for i in rng.choice(len(stated), size=n_ask, replace=False)]
        if ask is not None:
            asks = [ask]
        ask_cost = 40 * n_ask
        while True:
            q, a = self._filler_turn(rng)
            t = self._turn("user", q) + self._turn("assistant", a)
            if len(ids) + len(t) + ask_cost > length:
                break
            ids += t
            wts += [1.0] * len(t)
        spans = []
        for f in asks:
            q, pre, ans, post = qa[f]
            u = self._turn("user", q)
            a0 = [IM_START] + self.e("assistant\n" + pre)
            a1 = self.e(ans)
            a2 = self.e(post) + [IM_END] + self.e("\n")
            if len(ids) + len(u) + len(a0) + len(a1) + len(a2) > length:
                break
            ids += u + a0
            wts += [1.0] * (len(u) + len(a0))
            spans.append((len(ids), len(a1)))
            ids += a1 + a2
            wts += [ANSWER_W] * len(a1) + [1.0] * len(a2)
        return ids, wts, spans

    def dialogue_text(self, ids):
        return self.tok.decode(ids[1:])


def self_test(data_dir):
    t = Tasks(data_dir)
    rng = np.random.default_rng(0)
    for L in (256, 700, 2048):
        ids, w, s, k = t.passkey(rng, L)
        assert len(ids) <= L and len(ids) == len(w), (len(ids), L)
        assert t.tok.encode(t.tok.decode(ids[1:]), add_bos=True) == ids
        ids, w, spans = t.recall(rng, L)
        assert len(ids) <= L and t.tok.encode(t.tok.decode(ids[1:]), add_bos=True) == ids
        ids, w, spans = t.dialogue(rng, L)
        assert len(ids) <= L and t.tok.encode(t.tok.decode(ids[1:]), add_bos=True) == ids, t.tok.decode(ids)
    print("tasks self-test ok")


if __name__ == "__main__":
    import sys
    self_test(sys.argv[1])
