#!/usr/bin/env python3
"""Accuracy per policy x (task, length) of a `magicpig eval ruler` folder, with 95% Wilson
intervals (a record is correct when its score is 100: every reference string found), the
policy's mean measured cost, and how often its answer equals dense's on the same prompt.
Usage: quality_ruler_wilson.py DIR"""
import json, math, sys, collections
def wilson(k, n, z=1.959964):
    if n == 0: return (float("nan"),) * 2
    p = k / n; d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d; h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (100 * (c - h), 100 * (c + h))
def acc(rs):
    n = len(rs); k = sum(1 for r in rs if r["score"] >= 100); lo, hi = wilson(k, n)
    return f"{100*k/n:.0f} [{lo:.0f}, {hi:.0f}] ({k}/{n})" if n else "—"
recs = [json.loads(l) for l in open(sys.argv[1] + "/predictions.jsonl") if l.strip()]
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
