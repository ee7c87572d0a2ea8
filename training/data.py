"""Synthetic long-context retrieval episodes (RULER-like) built on real text, plus plain text.

Every sample is a token sequence of exactly `seq_len + 1` tokens (input = [:-1], target = [1:])
and a per-token mask: 1 on answer tokens, `text_weight` elsewhere (train.py passes 0, i.e. the
mask marks the answers; it applies its own answer/text loss weights). Plain-text samples have
no answer tokens. Samples are a pure function of (seed, step, index), so a resumed
run sees exactly the data it would have seen without the interruption.

Episode kinds (RULER names): single (one needle), single_noise (the same in RULER's
niah_single_1 haystack: one filler line repeated), single_far / single_noise_far and
single_veryfar / single_noise_veryfar / single_edge / single_noise_edge (the same with the
needle in the first 30% / 15% / 5% of the haystack: far from the question), single_uuid (word -> uuid, RULER's
niah_single_3 wording; a random version-4 uuid, 36 characters), multikey (one asked, distractor needles with
other keys; multikey_far: the asked one in the first 30%), multivalue (one key, several numbers, all asked), multiquery (several needles,
every key asked in turn: many recall events per sequence), vartrack (variable chains), text,
repeat (a text segment twice, loss on the copy) and digitcopy (a random digit string twice,
loss on the copy: forms the digit-copying heads within tens of steps; digitcopy_far: the first
string in the first 15% of the sequence).
Key words come from the corpora; a fixed hash puts 10% of them in a HELD-OUT vocabulary that
training never uses as needle keys (evaluate.py uses only those).
"""
import json, os, re, zlib
from collections import Counter
import numpy as np
import common

NEEDLE = "One of the special magic numbers for {key} is: {value}."
QUESTION = ("What is the special magic number for {key} mentioned in the provided text? "
            "The special magic number for {key} mentioned in the provided text is:")
QUERY_SHORT = "The special magic number for {key} is:"
UUID_NEEDLE = "One of the special magic uuids for {key} is: {value}."
UUID_QUESTION = ("What is the special magic uuid for {key} mentioned in the provided text? "
                 "The special magic uuid for {key} mentioned in the provided text is:")
MV_QUESTION = ("What are all the special magic numbers for {key} mentioned in the provided text? "
               "The special magic numbers for {key} mentioned in the provided text are:")
# RULER's noise haystack (niah_single_1): one line of filler repeated
NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
VT_ASSIGN_VALUE = "VAR {name} = {value}."
VT_ASSIGN_VAR = "VAR {name} = {other}."
VT_QUESTION = ("Find all variables that are assigned the value {value} in the text above. "
               "Answer: the variables assigned the value {value} are:")


def keyword_vocab():
    """(train_keys, heldout_keys): lower-case words of 4-10 letters seen >= 5 times in the
    training text; crc32(word) % 10 == 0 selects the held-out ones (stable across runs)."""
    path = os.path.join(common.WORK_DIR, "keywords.json")
    if not os.path.exists(path):
        counts = Counter()
        for name in common.CORPORA:
            text = open(common.split_path(name, "train"), encoding="utf-8").read()
            counts.update(w.lower() for w in re.findall(r"\b[A-Za-z]{4,10}\b", text))
        words = sorted(w for w, c in counts.items() if c >= 5)
        held = [w for w in words if zlib.crc32(w.encode()) % 10 == 0]
        train = [w for w in words if zlib.crc32(w.encode()) % 10 != 0]
        json.dump({"train": train, "heldout": held}, open(path, "w"))
    d = json.load(open(path))
    return d["train"], d["heldout"]


FAR_DEPTH = 0.3  # single_far / single_noise_far: needle depth uniform in [0, FAR_DEPTH)
VERY_FAR_DEPTH = 0.15  # single_veryfar / single_noise_veryfar: depth uniform in [0, VERY_FAR_DEPTH)
EDGE_DEPTH = 0.05  # single_edge / single_noise_edge: depth uniform in [0, EDGE_DEPTH)
# Single needles far from the question: kind -> (depth bound, RULER noise haystack). At 4,096
# tokens the model missed needles more than ~2,700 tokens back (training/README.md "twelfth
# session"), which uniform depths at random lengths rarely train (~5% of single episodes at
# 1,536-4,096); after 1,400 steps of the 30% kinds the first tenth (3,300+ tokens back) was
# still 0% ("thirteenth session"), hence the 15% kinds. After those, RULER's first tenth at
# 4,096 was still 20% (step 7100; the 0% depth puts the needle right after BOS), hence the 5%
# kinds.
FAR_NEEDLE_KINDS = {"single_far": (FAR_DEPTH, False), "single_noise_far": (FAR_DEPTH, True),
                    "single_veryfar": (VERY_FAR_DEPTH, False), "single_noise_veryfar": (VERY_FAR_DEPTH, True),
                    "single_edge": (EDGE_DEPTH, False), "single_noise_edge": (EDGE_DEPTH, True)}


class EpisodeMaker:
    def __init__(self, sp, part="train", keys=None):
        """part: which text split the haystacks come from; keys: needle key words
        (default: the training vocabulary for part='train', the held-out one otherwise)."""
        self.sp = sp
        train_keys, held_keys = keyword_vocab()
        self.keys = keys if keys is not None else (train_keys if part == "train" else held_keys)
        self.texts = [np.load(common.tokens_path(n, part), mmap_mode="r") for n in common.CORPORA]
        sizes = np.array([len(t) for t in self.texts], dtype=np.float64)
        self.text_p = sizes / sizes.sum()
        self.bos, self.eos = sp.bos_id(), sp.eos_id()
        # token ids after which a needle may be inserted (end of a sentence or a line)
        ends = np.zeros(sp.vocab_size(), dtype=bool)
        for i in range(sp.vocab_size()):
            p = sp.id_to_piece(i)
            ends[i] = p.endswith((".", "!", "?", ";")) or p == "<0x0A>"
        self.sentence_end = ends
        # first id after the control and byte pieces (randcopy draws ordinary pieces only)
        self.first_normal = next(i for i in range(sp.vocab_size())
                                 if not (sp.is_control(i) or sp.is_unknown(i) or sp.is_byte(i)))

    def enc(self, s):
        return self.sp.encode(s)

    def haystack(self, rng, n, noise=False):
        if n <= 0:
            return []
        if noise:  # the filler line repeated, from a random sentence of it
            if not hasattr(self, "_noise"):
                self._noise = self.enc(NOISE)
                self._noise_starts = [0] + [i for i in range(1, len(self._noise)) if self.sentence_end[self._noise[i - 1]]]
            reps = n // len(self._noise) + 2
            start = self._noise_starts[int(rng.integers(0, len(self._noise_starts)))]
            return (self._noise * reps)[start:start + n]
        c = rng.choice(len(self.texts), p=self.text_p)
        t = self.texts[c]
        start = int(rng.integers(0, len(t) - n - 1))
        return [int(x) for x in t[start:start + n]]

    def insert_points(self, rng, hay, depths):
        """Positions in hay (sorted like depths) just after a sentence end near each depth."""
        pts = []
        for d in depths:
            p = int(round(d * len(hay)))
            q = p
            while q < len(hay) and q - p < 40 and not self.sentence_end[hay[q - 1] if q > 0 else 0]:
                q += 1
            pts.append(p if q >= len(hay) or q - p >= 40 else q)
        return pts

    @staticmethod
    def number(rng):
        return str(int(rng.integers(1_000_000, 10_000_000)))

    def assemble(self, rng, seq_len, needles, depths, tail, text_weight, strict=False, noise=False):
        """needles: token lists placed at depths (fractions); tail: list of (tokens, is_answer)
        appended after the haystack. Returns (ids[seq_len+1], weights[seq_len+1])."""
        fixed = 1 + sum(len(n) for n in needles) + sum(len(t) for t, _ in tail)
        if strict and fixed > seq_len + 1:  # training tolerates a cut tail; evaluation must not
            raise ValueError(f"episode needs {fixed} tokens, more than seq_len+1={seq_len + 1}")
        hay = self.haystack(rng, seq_len + 1 - fixed, noise)
        order = np.argsort(depths, kind="stable")
        pts = self.insert_points(rng, hay, [depths[i] for i in order])
        ids, w = [self.bos], [0.0]
        prev = 0
        for k, i in enumerate(order):
            ids += hay[prev:pts[k]]; w += [text_weight] * (pts[k] - prev); prev = pts[k]
            ids += needles[i]; w += [text_weight] * len(needles[i])
        ids += hay[prev:]; w += [text_weight] * (len(hay) - prev)
        for toks, is_answer in tail:
            ids += toks; w += [1.0 if is_answer else text_weight] * len(toks)
        if len(ids) < seq_len + 1:
            raise ValueError(f"episode needs {fixed} tokens, more than seq_len+1={seq_len + 1}")
        return ids[:seq_len + 1], w[:seq_len + 1]

    # ---- episode kinds -------------------------------------------------------------------
    def single(self, rng, seq_len, text_weight, n_distractors=0, depth=None, key=None, strict=False, noise=False,
               uuid=False):
        """One asked needle (+ distractors); word -> 7-digit number, or word -> uuid with uuid=True."""
        keys = rng.choice(len(self.keys), size=1 + n_distractors, replace=False)
        keys = [self.keys[k] for k in keys]
        if key is not None:
            keys[0] = key
        vals = [self.uuid(rng) if uuid else self.number(rng) for _ in keys]
        template = UUID_NEEDLE if uuid else NEEDLE
        needles = [self.enc(template.format(key=k, value=v)) for k, v in zip(keys, vals)]
        depths = list(rng.random(len(keys)))
        if depth is not None:
            depths[0] = depth
        question = (UUID_QUESTION if uuid else QUESTION).format(key=keys[0])
        q = self.enc(question)
        # the answer as the tokenizer splits the whole sentence "... is: <value>", minus the question
        a = self.enc(question + " " + vals[0])[len(q):] if uuid else self.answer_tokens(vals[0])
        ids, w = self.assemble(rng, seq_len, needles, depths, [(q, False), (a, True), ([self.eos], True)], text_weight, strict,
                               noise)
        return ids, w, vals[0]

    @staticmethod
    def uuid(rng):
        h = rng.integers(0, 16, size=32)
        h[12] = 4                                  # version nibble
        h[16] = 8 + int(rng.integers(0, 4))         # variant 10xx
        x = "".join("0123456789abcdef"[int(v)] for v in h)
        return f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"

    def answer_tokens(self, value):
        # "is: 1234567" tokenizes as ... ':' '▁' '1' ... '7' ; the question ends with ':' so the
        # answer is '▁' + digits, exactly what the tokenizer gives for the whole sentence
        return self.enc(QUERY_SHORT.format(key="x") + " " + value)[len(self.enc(QUERY_SHORT.format(key="x"))):]

    def multiquery(self, rng, seq_len, text_weight, n=4):
        keys = [self.keys[k] for k in rng.choice(len(self.keys), size=n, replace=False)]
        vals = [self.number(rng) for _ in keys]
        needles = [self.enc(NEEDLE.format(key=k, value=v)) for k, v in zip(keys, vals)]
        tail = []
        for i in rng.permutation(n):
            tail.append((self.enc(QUERY_SHORT.format(key=keys[i])), False))
            tail.append((self.answer_tokens(vals[i]) + self.enc(".")[1:], True))
        return self.assemble(rng, seq_len, needles, list(rng.random(n)), tail, text_weight)[:2]

    def one_token_keys(self):
        """The keys that are one token after "for " (1,204 of the training keys): with them a
        key sits at a fixed offset from its value, the simplest binding to learn first."""
        if not hasattr(self, "_one_token_keys"):
            base = len(self.enc("for"))
            self._one_token_keys = [k for k in self.keys if len(self.enc("for " + k)) - base == 1]
        return self._one_token_keys

    def kvrecall(self, rng, seq_len, text_weight, one_token=False):
        """Associative recall without a haystack: 2-16 needles back to back, then 1-8 of their
        keys asked (short or RULER-long question, at random), each answer checked. Every
        question is a choice among all the needles, decided only by the key: the skill multi-key
        retrieval needs, which the needle-in-haystack kinds leave to chance (one asked needle,
        or a few per thousand tokens). Text fills the front when the needles are fewer than
        the length."""
        fit = max(2, min(16, (seq_len - 60) // 18))  # ~18 tokens per needle, room for >= 1 long question
        n = int(rng.integers(2, fit + 1))
        pool = self.one_token_keys() if one_token else self.keys
        keys = [pool[k] for k in rng.choice(len(pool), size=n, replace=False)]
        vals = [self.number(rng) for _ in keys]
        needles = [self.enc(NEEDLE.format(key=k, value=v)) for k, v in zip(keys, vals)]
        while n > 2 and 1 + sum(len(t) for t in needles) + 30 > seq_len + 1:  # room for one short question
            n -= 1; needles.pop()
        turns = []
        for i in rng.permutation(n)[:int(rng.integers(1, 9))]:
            question = QUERY_SHORT if rng.random() < 0.5 else QUESTION
            turns.append((self.enc(question.format(key=keys[i])), self.answer_tokens(vals[i]) + self.enc(".")[1:], i))
        body, w = [], []
        for t in needles:
            body += t; w += [text_weight] * len(t)
        for j, (q, a, i) in enumerate(turns):
            if j == 0 and 1 + len(body) + len(q) + len(a) > seq_len + 1:
                q = self.enc(QUERY_SHORT.format(key=keys[i]))  # the room left is sized for a short question
            if 1 + len(body) + len(q) + len(a) > seq_len + 1:
                break
            body += q + a; w += [text_weight] * len(q) + [1.0] * len(a)
        body, w = body[:seq_len], w[:seq_len]  # lengths below ~80 tokens: cut
        pad = seq_len - len(body)
        ids = [self.bos] + (self.haystack(rng, pad) if pad > 0 else []) + body
        ws = [0.0] + [text_weight] * pad + w
        return ids[:seq_len + 1], ws[:seq_len + 1]

    def multivalue(self, rng, seq_len, text_weight, n=3):
        key = self.keys[int(rng.integers(len(self.keys)))]
        vals = [self.number(rng) for _ in range(n)]
        needles = [self.enc(NEEDLE.format(key=key, value=v)) for v in vals]
        depths = sorted(rng.random(n))  # answer lists the numbers in order of appearance
        ans = self.enc(MV_QUESTION.format(key=key) + " " + ", ".join(vals))[len(self.enc(MV_QUESTION.format(key=key))):]
        return self.assemble(rng, seq_len, needles, depths, [(self.enc(MV_QUESTION.format(key=key)), False), (ans, True), ([self.eos], True)], text_weight)[:2]

    def vartrack(self, rng, seq_len, text_weight, hops=3):
        letters = np.array(list("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
        names = ["".join(rng.choice(letters, 5)) for _ in range(hops)]
        value = str(int(rng.integers(10_000, 100_000)))
        needles = [self.enc(VT_ASSIGN_VALUE.format(name=names[0], value=value))]
        needles += [self.enc(VT_ASSIGN_VAR.format(name=names[i], other=names[i - 1])) for i in range(1, hops)]
        depths = sorted(rng.random(hops))  # chain in reading order
        q = self.enc(VT_QUESTION.format(value=value))
        ans = self.enc(VT_QUESTION.format(value=value) + " " + " ".join(names))[len(q):]
        return self.assemble(rng, seq_len, needles, depths, [(q, False), (ans, True), ([self.eos], True)], text_weight)[:2]

    def repeat(self, rng, seq_len):
        """A text segment followed by the same segment again; the second copy is the answer.
        Every token of the copy is a recall event for an induction (copy) head, which is what
        needle retrieval is built on — dense supervision for forming it fast."""
        n = seq_len // 2
        seg = self.haystack(rng, n)
        ids = [self.bos] + seg + seg + self.haystack(rng, seq_len - 2 * n)
        mask = [0.0] * (n + 2) + [1.0] * (n - 1) + [0.0] * (seq_len - 2 * n)
        return ids, mask

    def digitcopy(self, rng, seq_len, max_gap=None, far=False):
        """A random digit string in some text, then the same string again (loss on the copy).
        Dense supervision for the digit-copying induction heads that needle answers need:
        over a 10-token alphabet they form in tens of steps, unlike copying of general text
        (a 4096-token vocabulary is far harder to copy through 64-dimensional heads).
        Kind "digitcopy_gapN" limits the gap to N tokens: N=0 is a fixed distance, which a
        positional head solves within tens of steps; growing N afterwards forces content-based
        copying (the gap curriculum suggested in README.md). far=True (kind "digitcopy_far") puts
        the first copy in the first VERY_FAR_DEPTH of the sequence: copying across ~85% of it."""
        k = int(min(40, max(7, (seq_len - 20) // 2)))
        rest = seq_len - 2 * (k + 1)
        if far:
            h1 = int(rng.integers(0, int(VERY_FAR_DEPTH * rest) + 1))
        elif max_gap is None:
            h1 = int(rng.integers(0, rest + 1))
        else:  # at most max_gap haystack tokens between the copies (0: fixed distance k+1)
            h1 = rest - int(rng.integers(0, min(max_gap, rest) + 1))
        space = self.sp.piece_to_id("\u2581")
        digits = [self.sp.piece_to_id(str(d)) for d in rng.integers(0, 10, size=k)]
        ids = [self.bos] + self.haystack(rng, h1) + [space] + digits + self.haystack(rng, rest - h1) + [space] + digits
        mask = [0.0] * (seq_len + 1 - k) + [1.0] * k
        return ids, mask

    def randcopy(self, rng, seq_len, max_gap=0):
        """Random vocabulary tokens, then the same tokens again (loss on the copy), optionally
        with up to max_gap haystack tokens between. Each token of a random sequence is (nearly)
        unique, so copying needs exactly one previous-token head and one induction head: the
        cleanest signal for forming them (the 64x32-token probe breaks from chance after ~170
        steps at lr 1e-3, batch 32). Digits are ambiguous (10 symbols repeat within a string), so
        digit copying comes after this, not before."""
        gap = int(rng.integers(0, max_gap + 1)) if max_gap > 0 else 0
        n = (seq_len - gap) // 2
        lo = self.first_normal
        seg = [int(t) for t in rng.integers(lo, self.sp.vocab_size(), size=n)]
        ids = [self.bos] + seg + self.haystack(rng, seq_len - 2 * n) + seg
        ids = ids[:seq_len + 1]
        mask = [0.0] * (seq_len + 1 - n) + [1.0] * n
        mask[seq_len + 1 - n] = 0.0  # the first token of the copy cannot be predicted
        return ids, mask

    def text(self, rng, seq_len):
        ids = [self.bos] + self.haystack(rng, seq_len)
        return ids, [0.0] * (seq_len + 1)

    # ---- batches -------------------------------------------------------------------------
    def sample(self, rng, seq_len, mix, text_weight):
        kinds = list(mix.keys())
        p = np.array([mix[k] for k in kinds], dtype=np.float64); p /= p.sum()
        kind = kinds[rng.choice(len(kinds), p=p)]
        if kind == "single":
            return self.single(rng, seq_len, text_weight)[:2]
        if kind == "multikey":
            return self.single(rng, seq_len, text_weight, n_distractors=3)[:2]
        if kind == "multikey_far":  # the asked needle in the first FAR_DEPTH, distractors anywhere
            return self.single(rng, seq_len, text_weight, n_distractors=3, depth=float(rng.uniform(0.0, FAR_DEPTH)))[:2]
        if kind == "single_noise":  # RULER niah_single_1's haystack
            return self.single(rng, seq_len, text_weight, noise=True)[:2]
        if kind in FAR_NEEDLE_KINDS:
            bound, noise = FAR_NEEDLE_KINDS[kind]
            return self.single(rng, seq_len, text_weight, depth=float(rng.uniform(0.0, bound)), noise=noise)[:2]
        if kind == "single_uuid":
            return self.single(rng, seq_len, text_weight, uuid=True)[:2]
        if kind == "multiquery":
            fit = max(1, min(8, (seq_len - 16) // 48))  # ~48 tokens per needle + query pair
            return self.multiquery(rng, seq_len, text_weight, n=int(rng.integers(1, fit + 1)))
        if kind == "kvrecall":
            return self.kvrecall(rng, seq_len, text_weight)
        if kind == "kvrecall1":  # one-token keys
            return self.kvrecall(rng, seq_len, text_weight, one_token=True)
        if kind == "multivalue":  # question ~30 tokens, ~25 per needle and ~8 per answer
            fit = max(2, min(4, (seq_len - 40) // 33))
            return self.multivalue(rng, seq_len, text_weight, n=int(rng.integers(2, fit + 1)))
        if kind == "vartrack":
            fit = max(2, min(4, (seq_len - 40) // 25))
            return self.vartrack(rng, seq_len, text_weight, hops=int(rng.integers(2, fit + 1)))
        if kind == "text":
            return self.text(rng, seq_len)
        if kind == "repeat":
            return self.repeat(rng, seq_len)
        if kind == "randcopy":
            return self.randcopy(rng, seq_len)
        if kind.startswith("randcopy_gap"):
            return self.randcopy(rng, seq_len, max_gap=int(kind[len("randcopy_gap"):]))
        if kind == "digitcopy":
            return self.digitcopy(rng, seq_len)
        if kind == "digitcopy_far":
            # the string in the first 15% of the sequence, its copy at the end: at 4,096 tokens the
            # model finds far needles but miscopies their digits (19 of 23 misses at step 6936 had
            # the first digit right; "9999999" for 9553937), so copying at distance is the skill
            # that is short
            return self.digitcopy(rng, seq_len, far=True)
        if kind.startswith("digitcopy_gap"):
            return self.digitcopy(rng, seq_len, max_gap=int(kind[len("digitcopy_gap"):]))
        raise ValueError(f"unknown episode kind {kind}")

    def batch(self, seed, step, batch, seq_len, mix, text_weight):
        rng = np.random.default_rng([seed, step])
        xs, ws = zip(*(self.sample(rng, seq_len, mix, text_weight) for _ in range(batch)))
        return np.asarray(xs, dtype=np.int64), np.asarray(ws, dtype=np.float32)
