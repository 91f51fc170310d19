#!/usr/bin/env python3
"""Bookkeeping simulator of the Cascading KV Cache (CPU, pure Python, no dependencies).

It restates, per (batch, KV head), the logic of the reference Triton cache kernel of the
Cascading KV Cache paper (token push `_update_kv_cache_inner`, position update
`_update_positional_idx`), so that the C++ port (sdk/memory/cascade_index.*) can be tested
against concrete traces. Keys and values are replaced by the token's original index; only the
bookkeeping is modelled.

Usage:
  python3 tools/cascade_sim.py                    worked example and span check (printed)
  python3 tools/cascade_sim.py --fixtures DIR     writes the trace fixtures the unit test reads
                                                  (tests/cascade/*.trace; see its README)
"""
import argparse
import os
import random
import struct
from fractions import Fraction


def f32(x):
    """Rounds a Python float to the nearest fp32 value (round to nearest even)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


class CascadeSim:
    def __init__(self, n_sink, window, cascades, eager_fill=True, every_n=None):
        self.NS = n_sink
        self.W = window            # slots per sub-cache
        self.C = cascades
        self.eager_fill = eager_fill
        self.every_n = every_n or [2 ** i for i in range(cascades)]   # "pow2"
        self.sinks = []            # token ids in the sink area
        n = cascades * window
        self.tok = [None] * n      # token id per slot (stands for key/value)
        self.score = [0.0] * n     # EMA score per slot
        self.stored = [0] * cascades
        self.start = [0] * cascades
        self.seen = 0              # tokens pushed so far (per layer)
        self.pos = [0] * n         # derived RoPE index (before +NS shift)

    # ---- one token ---------------------------------------------------------
    def push(self, tok, score):
        g = self.seen              # 0-based global index of this token
        self.seen += 1
        if len(self.sinks) < self.NS:
            self.sinks.append(tok)          # sinks keep no score
            return
        full_phase = self.eager_fill and g <= self.NS + self.C * self.W
        t = g - self.NS
        x = (tok, score)
        for i in range(self.C):
            base = i * self.W
            accept = full_phase or (t % self.every_n[i] == 0)
            if accept:
                if self.stored[i] < self.W:                 # case: room left
                    s = base + self.start[i] + self.stored[i]
                    self.tok[s], self.score[s] = x
                    self.stored[i] += 1
                    return
                s = base + self.start[i]                    # case: evict oldest
                old = (self.tok[s], self.score[s])
                self.tok[s], self.score[s] = x
                self.start[i] = (self.start[i] + 1) % self.W
                x = old                                     # carry evicted on
                continue
            if self.stored[i] == 0:                         # edge: empty, not accepting
                s = base + self.start[i]
                self.tok[s], self.score[s] = x
                self.stored[i] += 1
                return
            s = base + (self.start[i] - 1) % self.stored[i]  # newest slot
            if x[1] >= self.score[s]:                        # tie -> incoming wins
                self.tok[s], self.score[s] = x
            return                                           # loser dropped
        # fell off the last sub-cache: dropped

    # ---- after a batch of pushes -------------------------------------------
    def recompute_pos(self):
        ub = sum(self.stored)
        for i in range(self.C):
            n = min(self.W, self.stored[i])
            if n == 0:
                break
            for j in range(self.W):
                self.pos[i * self.W + j] = ((j - self.start[i]) % n) + ub - n
            ub -= self.W
            if ub <= 0:
                break

    def ema_decay_and_add(self, beta, q_len, add, fp32=False):
        """score <- beta**q_len * score + add[slot] (add: per-slot EMA increment).

        fp32=True models the port: scores and the factor beta**q_len are fp32 values, the
        update is computed in double (the product of two fp32 values is exact there) and the
        result rounded to fp32.
        """
        f = beta ** q_len
        if fp32:
            f = f32(f32(beta) ** q_len)
        for s in range(len(self.score)):
            if fp32:
                self.score[s] = f32(f * self.score[s] + add[s])
            else:
                self.score[s] = f * self.score[s] + add[s]

    def rope(self):
        """RoPE index of every slot, sinks first: slot index, then pos + NS (shift once > NS)."""
        shift = self.NS if self.seen > self.NS else 0
        return list(range(self.NS)) + [p + shift for p in self.pos]

    def view(self):
        """(rope_pos, token) for sinks then valid cache slots, sorted by rope pos."""
        shift = self.NS if self.seen > self.NS else 0
        out = [(p, t) for p, t in enumerate(self.sinks)]
        for s in range(self.C * self.W):
            c = s // self.W
            if (s - c * self.W) < self.stored[c]:
                out.append((self.pos[s] + shift, self.tok[s]))
        return sorted(out)


def trace_small():
    print("=== worked example: NS=2, W=4, C=3 (cache 12 + 2 sinks), pow2, eager fill")
    sim = CascadeSim(n_sink=2, window=4, cascades=3)
    rng = random.Random(0)
    for g in range(40):
        sc = rng.random()            # stand-in for the token's EMA score
        sim.push(g, round(sc, 2))
        sim.recompute_pos()
        if g in (1, 13, 14, 15, 16, 17, 20, 39):
            print(f"after token {g:2d}: sinks={sim.sinks} stored={sim.stored} start={sim.start}")
            for c in range(sim.C):
                sl = slice(c * sim.W, (c + 1) * sim.W)
                print(f"   cascade {c}: tokens={sim.tok[sl]} scores={sim.score[sl]} "
                      f"pos={sim.pos[sl]}")
            print("   rope order:", sim.view())


def span_check():
    print("=== span check (random scores, no EMA dynamics)")
    for W, C in [(64, 1), (64, 2), (64, 4), (64, 8), (16, 8)]:
        sim = CascadeSim(n_sink=4, window=W, cascades=C)
        rng = random.Random(1)
        N = 4 + W * (2 ** C) * 3
        for g in range(N):
            sim.push(g, rng.random())
        valid = [sim.tok[s] for s in range(C * W) if (s % W) < sim.stored[s // W]]
        oldest = min(valid)
        print(f"W={W:3d} C={C}: cache={C*W:5d} observed span={N - oldest:7d} "
              f"formula W*(2^C-1)={W*(2**C-1):7d} sparsity={1 - C/(2**C-1):.3f}")


# ---- trace fixtures for the C++ unit test -------------------------------------------------
#
# One file per case. Each stream (KV head) is simulated by its own CascadeSim fed the same
# tokens with its own scores; the ring pointers must agree between them. Inputs are integers
# times a power of two, so they are exact in fp32 and short to write. Format, one record a line:
#   case NAME ns NS w W c C eager 0|1 streams S beta B
#   decay Q E        then S lines  inc STREAM v_0 .. v_{n_slots-1}   increment = v * 2^-E
#   push Q E         then S lines  init STREAM v_0 .. v_{Q-1}         score = v * 2^-E
#   state SEEN NEXT_POSITION SPAN          (after the push; then these lines:)
#   stored ..., start ... (per sub-cache); valid 0/1 per slot; rope ... per slot;
#   orig STREAM ... per slot (-1 empty); score STREAM ... per slot (shortest fp32 decimal)
#   end
# Sink entries of an increment are garbage (SINK_GARBAGE) that the port must ignore.

SINK_GARBAGE = 99999

CASES = [
    # name, NS, W, C, eager, streams, beta, scores, chunks, tokens
    ("basic", 4, 4, 4, True, 3, 0.9999, "rand", "single", 120),
    ("chunked", 4, 8, 4, True, 3, 0.9999, "rand", "chunks", 500),
    ("streaming_c1", 4, 6, 1, True, 2, 0.9999, "rand", "chunks", 120),
    ("no_sinks", 0, 4, 3, True, 2, 0.9999, "rand", "single", 80),
    ("w1", 2, 1, 5, True, 2, 0.9999, "rand", "single", 90),
    ("lazy_odd_w", 2, 3, 3, False, 2, 0.9999, "rand", "single", 90),
    ("lazy_chunked", 3, 4, 4, False, 3, 0.9999, "rand", "chunks", 400),
    ("w6", 3, 6, 3, True, 2, 0.9999, "rand", "chunks", 300),
    ("ties_zero", 2, 4, 3, True, 2, 0.9999, "zero", "single", 80),
    ("ties_dyadic", 2, 4, 4, True, 3, 1.0, "dyadic", "single", 110),
    ("ties_half", 1, 2, 3, False, 2, 0.5, "dyadic", "chunks", 120),
]


def _inputs(rng, kind, n, what):
    """n integer mantissas and their exponent E (value = v * 2^-E)."""
    if kind == "zero":
        return [0] * n, 0
    if kind == "dyadic":  # few distinct values: many exact ties
        return [rng.choice([0, 1, 2]) for _ in range(n)], 2
    if what == "init":  # in [0, 1/64): the attention a token got inside its chunk
        return [rng.randrange(1 << 16) for _ in range(n)], 22
    return [rng.randrange(1 << 10) for _ in range(n)], 20  # increments, in [0, 1/1024)


def _f32_neighbours(x):
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    lo, hi = (bits - 1, bits + 1) if x > 0 else (bits + 1, bits - 1)
    return [struct.unpack("<f", struct.pack("<I", b))[0] for b in (lo, hi)]


def _fmt_score(x):
    """Shortest decimal whose nearest fp32 is x (what strtof reads back), checked exactly."""
    if x == 0:
        return "0"
    lo, hi = _f32_neighbours(x)
    fx = Fraction(x)
    for digits in range(1, 10):
        r = f"{x:.{digits}g}"
        d = Fraction(r)  # strictly closer to x than to either neighbour: no rounding doubt
        if abs(d - fx) * 2 < fx - Fraction(lo) and abs(d - fx) * 2 < Fraction(hi) - fx:
            return r
    raise AssertionError(x)


def write_case(out, case, seed):
    name, ns, w, c, eager, streams, beta, kind, chunks, tokens = case
    rng = random.Random(seed)
    sims = [CascadeSim(n_sink=ns, window=w, cascades=c, eager_fill=eager) for _ in range(streams)]
    n_slots = ns + c * w
    out.write(f"case {name} ns {ns} w {w} c {c} eager {int(eager)} streams {streams} "
              f"beta {_fmt_score(f32(beta))}\n")
    seen = 0
    while seen < tokens:
        if chunks == "single":
            q = 1
        else:  # short and long chunks, some longer than the whole cache
            q = rng.choice([1, 1, 2, 3, rng.randrange(1, w + 2), rng.randrange(1, 2 * c * w + 8)])
        q = min(q, tokens - seen)
        if seen > 0 and rng.random() < 0.9:  # the EMA step before the push (mostly present)
            out.write(f"decay {q} ")
            incs = []
            for s in range(streams):
                v, e = _inputs(rng, kind, c * w, "inc")
                incs.append(v)
            out.write(f"{e}\n")
            for s in range(streams):
                row = [SINK_GARBAGE] * ns + incs[s]
                out.write(f"inc {s} " + " ".join(map(str, row)) + "\n")
                sims[s].ema_decay_and_add(beta, q, [x * 2.0 ** -e for x in incs[s]], fp32=True)
        inits = []
        for s in range(streams):
            v, e = _inputs(rng, kind, q, "init")
            inits.append(v)
        out.write(f"push {q} {e}\n")
        for s in range(streams):
            out.write(f"init {s} " + " ".join(str(x) for x in inits[s]) + "\n")
            for k in range(q):
                sims[s].push(seen + k, f32(inits[s][k] * 2.0 ** -e))
            sims[s].recompute_pos()
        seen += q
        a = sims[0]
        for b in sims[1:]:
            assert (b.stored, b.start, b.pos) == (a.stored, a.start, a.pos), "heads diverged"
        held = [a.tok[i] for i in range(c * w) if i % w < a.stored[i // w]]
        span = seen - 1 - min(held) if held else 0
        nxt = len(a.sinks) + sum(a.stored)
        out.write(f"state {seen} {nxt} {span}\n")
        out.write("stored " + " ".join(map(str, a.stored)) + "\n")
        out.write("start " + " ".join(map(str, a.start)) + "\n")
        valid = [int(i < len(a.sinks)) for i in range(ns)]
        valid += [int(i % w < a.stored[i // w]) for i in range(c * w)]
        out.write("valid " + " ".join(map(str, valid)) + "\n")
        out.write("rope " + " ".join(map(str, a.rope())) + "\n")
        for s, sim in enumerate(sims):
            toks = sim.sinks + [-1] * (ns - len(sim.sinks))
            toks += [-1 if x is None else x for x in sim.tok]
            out.write(f"orig {s} " + " ".join(map(str, toks)) + "\n")
            scores = [0.0] * ns + sim.score
            out.write(f"score {s} " + " ".join(_fmt_score(x) for x in scores) + "\n")
        out.write("end\n")
        assert len(valid) == n_slots


def write_fixtures(folder):
    os.makedirs(folder, exist_ok=True)
    for seed, case in enumerate(CASES):
        path = os.path.join(folder, case[0] + ".trace")
        with open(path, "w") as out:
            out.write("# GENERATED by tools/cascade_sim.py --fixtures; do not edit.\n")
            write_case(out, case, 1000 + seed)
        print("wrote", path)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixtures", metavar="DIR", help="write the unit-test trace fixtures to DIR")
    args = ap.parse_args()
    if args.fixtures:
        write_fixtures(args.fixtures)
    else:
        trace_small()
        span_check()
