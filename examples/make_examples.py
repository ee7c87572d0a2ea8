#!/usr/bin/env python3
"""Writes the example prompts of examples/ from eval/data (held-out Austen text and the
held-out needle keys), deterministically. Run from anywhere: python3 examples/make_examples.py

  needle_4k.txt    ~4k tokens of text with one needle at 40% depth, question at the end
  needle_512.txt   the same at ~500 tokens
  needle_2k.txt    the same at ~2k tokens (the length the shipped model retrieves best at)
  multikey_4k.txt  ~4k tokens with four needles (one asked, three distractors)
  story.txt        the opening of a held-out chapter, to be continued
The templates are the ones the shipped model was trained on (training/data.py) and that
`magicpig eval ruler` uses (src/eval/ruler_*).
"""
import os, random, zlib

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "eval", "data")
NEEDLE = "One of the special magic numbers for {key} is: {value}."
QUESTION = ("What is the special magic number for {key} mentioned in the provided text? "
            "The special magic number for {key} mentioned in the provided text is:")
CHARS_4K = 15000  # ~3.7 characters per token for this vocabulary: ~4k tokens with the question
CHARS_512 = 1650
CHARS_2K = 7400


def sentences(text):
    out, cur = [], []
    for word in text.split():
        cur.append(word)
        if word.endswith((".", "!", "?")):
            out.append(" ".join(cur)); cur = []
    return out


def haystack_with(needles, depths, chars):
    sents = sentences(open(os.path.join(DATA, "haystack.txt"), encoding="utf-8").read())
    hay, n = [], 0
    for s in sents:
        if n + len(s) > chars:
            break
        hay.append(s); n += len(s) + 1
    for needle, d in sorted(zip(needles, depths), key=lambda x: -x[1]):
        hay.insert(int(d * len(hay)), needle)
    return " ".join(hay)


def main():
    rng = random.Random(2026)
    words = [w.strip() for w in open(os.path.join(DATA, "words.txt"), encoding="utf-8") if w.strip()]
    keys = [w for w in words if zlib.crc32(w.encode()) % 10 == 0]
    rng.shuffle(keys)
    vals = [str(rng.randrange(1_000_000, 10_000_000)) for _ in range(5)]
    text = haystack_with([NEEDLE.format(key=keys[0], value=vals[0])], [0.4], CHARS_4K)
    open(os.path.join(HERE, "needle_4k.txt"), "w").write(text + "\n" + QUESTION.format(key=keys[0]))
    needles = [NEEDLE.format(key=k, value=v) for k, v in zip(keys[1:5], vals[1:5])]
    text = haystack_with(needles, [0.15, 0.35, 0.6, 0.8], CHARS_4K)
    open(os.path.join(HERE, "multikey_4k.txt"), "w").write(text + "\n" + QUESTION.format(key=keys[3]))
    sents = sentences(open(os.path.join(DATA, "haystack.txt"), encoding="utf-8").read())
    open(os.path.join(HERE, "story.txt"), "w").write(" ".join(sents[:12]))
    val512 = str(rng.randrange(1_000_000, 10_000_000))  # drawn after the others: their answers stay
    text = haystack_with([NEEDLE.format(key=keys[5], value=val512)], [0.3], CHARS_512)
    open(os.path.join(HERE, "needle_512.txt"), "w").write(text + "\n" + QUESTION.format(key=keys[5]))
    val2k = str(rng.randrange(1_000_000, 10_000_000))  # drawn last, for the same reason
    text = haystack_with([NEEDLE.format(key=keys[6], value=val2k)], [0.5], CHARS_2K)
    open(os.path.join(HERE, "needle_2k.txt"), "w").write(text + "\n" + QUESTION.format(key=keys[6]))
    print("answers: needle_4k", keys[0], vals[0], "| multikey_4k", keys[3], vals[3], "| needle_512", keys[5], val512,
          "| needle_2k", keys[6], val2k)


if __name__ == "__main__":
    main()
