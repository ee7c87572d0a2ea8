#!/usr/bin/env python3
"""Accuracy per policy x (task, length) of a `magicpig eval ruler` folder, with 95% Wilson
intervals (a record is correct when its score is 100: every reference string found), the
policy's mean measured cost, and how often its answer equals dense's on the same prompt.
Then RULER's own points (mean string_match_all, partial credit: 1 of fwe's 3 words = 33.3)
per cell with a 95% interval, and each policy's paired difference from dense on the same
prompts with a 95% interval (normal approximation over samples: mean +- 1.96 sd/sqrt(n)).
Usage: quality_ruler_wilson.py DIR [DIR...]  (several folders: their records together; a folder
holds predictions.jsonl, or predictions.jsonl.gz as the committed ones in docs/quality-records/ do)"""
import gzip, json, math, os, sys, collections
def wilson(k, n, z=1.959964):
    if n == 0: return (float("nan"),) * 2
    p = k / n; d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d; h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (100 * (c - h), 100 * (c + h))
def acc(rs):
    n = len(rs); k = sum(1 for r in rs if r["score"] >= 100); lo, hi = wilson(k, n)
    return f"{100*k/n:.0f} [{lo:.0f}, {hi:.0f}] ({k}/{n})" if n else "—"
def lines(d):
    plain = os.path.join(d, "predictions.jsonl")
    return open(plain) if os.path.exists(plain) else gzip.open(plain + ".gz", "rt")
recs = [json.loads(l) for d in sys.argv[1:] for l in lines(d) if l.strip()]
pols = list(dict.fromkeys(r["policy"] for r in recs))
cells = list(dict.fromkeys((r["task"], r["length"]) for r in recs))
dense = {(r["task"], r["length"], r["sample"]): r["prediction"] for r in recs if r["policy"] == "dense"}
print("| policy | " + " | ".join(f"{t} {L}" for t, L in cells) + " | all | mean cost | same answer as dense |")
print("|---|" + "---:|" * (len(cells) + 3))
for p in pols:
    rs = [r for r in recs if r["policy"] == p]
    row = [acc([r for r in rs if (r["task"], r["length"]) == c]) for c in cells]
    # records whose answer ended on the prefill's first token took no decode step (cost reported 1)
    stepped = [r["cost"] for r in rs if r["generated_tokens"] > 1 or r["policy"] == "dense"]
    cost = sum(stepped) / len(stepped) if stepped else float("nan")
    ds = [r for r in rs if (r["task"], r["length"], r["sample"]) in dense]
    same = sum(1 for r in ds if r["prediction"] == dense[(r["task"], r["length"], r["sample"])])
    print(f"| {p} | " + " | ".join(row) + f" | {acc(rs)} | {cost:.4f} | {same}/{len(ds)} |")

def mean_ci(xs):
    n = len(xs); m = sum(xs) / n
    if n < 2: return m, float("nan")
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    return m, 1.959964 * sd / math.sqrt(n)
def pts(xs):
    if not xs: return "—"
    m, h = mean_ci(xs)
    return f"{m:.1f} ± {h:.1f}"
dense_score = {(r["task"], r["length"], r["sample"]): r["score"] for r in recs if r["policy"] == "dense"}
print()
print("| policy (RULER points, mean ± 95%) | " + " | ".join(f"{t} {L}" for t, L in cells) +
      " | all | all − dense (paired) |")
print("|---|" + "---:|" * (len(cells) + 2))
for p in pols:
    rs = [r for r in recs if r["policy"] == p]
    row = [pts([r["score"] for r in rs if (r["task"], r["length"]) == c]) for c in cells]
    diffs = [r["score"] - dense_score[k] for r in rs
             if (k := (r["task"], r["length"], r["sample"])) in dense_score]
    print(f"| {p} | " + " | ".join(row) + f" | {pts([r['score'] for r in rs])} | {pts(diffs)} |")
print()
print("| policy (RULER points − dense's, paired, mean ± 95%) | " + " | ".join(f"{t} {L}" for t, L in cells) + " |")
print("|---|" + "---:|" * len(cells))
for p in pols:
    if p == "dense": continue
    row = []
    for c in cells:
        d = [r["score"] - dense_score[k] for r in recs if r["policy"] == p and (r["task"], r["length"]) == c
             and (k := (r["task"], r["length"], r["sample"])) in dense_score]
        row.append(pts(d))
    print(f"| {p} | " + " | ".join(row) + " |")
# Sampling policies against the top-key / page baselines, paired on the same prompts.
score = {(r["task"], r["length"], r["sample"], r["policy"]): r["score"] for r in recs}
pairs = [(a, b) for a in pols if a.split(":")[0] in ("magicpig", "oracle-sampling")
         for b in pols if b.split(":")[0] in ("topk", "quest")]
if pairs:
    print()
    print("| policy A − policy B (RULER points, paired, mean ± 95%) | " +
          " | ".join(f"{t} {L}" for t, L in cells) + " | all |")
    print("|---|" + "---:|" * (len(cells) + 1))
    for a, b in pairs:
        def diffs(cs):
            return [score[k + (a,)] - score[k + (b,)] for k in
                    {(r["task"], r["length"], r["sample"]) for r in recs if (r["task"], r["length"]) in cs}
                    if k + (a,) in score and k + (b,) in score]
        print(f"| {a} − {b} | " + " | ".join(pts(diffs([c])) for c in cells) + f" | {pts(diffs(cells))} |")
