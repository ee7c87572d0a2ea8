#!/usr/bin/env python3
"""RULER's string_match_all credits a reference found anywhere in the answer, so a chat answer
that names a wrong number, then restates the question and names the right one, scores 100.
This counts, per policy and niah task, how many answers are right by RULER's rule and how many
by their *first* value alone (the first 7-digit number, or the first uuid for the uuid tasks),
and how many right-by-RULER answers name more than one distinct value.
Usage: quality_ruler_first_answer.py DIR [DIR...]  (niah_single_*/niah_multikey_* records)"""
import json, re, sys, collections
VALUE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\d{5,}", re.I)
recs = [json.loads(l) for d in sys.argv[1:] for l in open(d + "/predictions.jsonl") if l.strip()]
recs = [r for r in recs if re.match(r"niah_(single|multikey)_", r["task"])]
cnt = collections.defaultdict(lambda: [0, 0, 0, 0])  # n, ruler right, first right, right with >1 values
for r in recs:
    vals = VALUE.findall(r["prediction"])
    ref = r["references"][0].lower()
    c = cnt[(r["policy"], r["task"])]
    c[0] += 1
    c[1] += r["score"] >= 100
    c[2] += bool(vals) and vals[0].lower() == ref
    c[3] += r["score"] >= 100 and len({v.lower() for v in vals}) > 1
tasks = list(dict.fromkeys(r["task"] for r in recs))
pols = list(dict.fromkeys(r["policy"] for r in recs))
print("| policy | " + " | ".join(tasks) + " |")
print("|---|" + "---:|" * len(tasks))
for p in pols:
    cells = []
    for t in tasks:
        n, ruler, first, multi = cnt[(p, t)]
        cells.append(f"{ruler} / {first} / {multi} of {n}" if n else "—")
    print(f"| {p} | " + " | ".join(cells) + " |")
print("\ncells: right by RULER's rule / right by the first value / right by RULER but naming more than one value")
