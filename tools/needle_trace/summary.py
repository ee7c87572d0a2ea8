#!/usr/bin/env python3
"""Summarise needle-trace output folders (docs/history/quality-2026-12-05.md, "The 4k single-needle miss").

usage: summary.py DIR [DIR ...]

"Retrieval head-steps" are the (sample, step, layer, head) where exact attention puts >= 0.5 of
its weight on one needle token (the copy heads). For them: how often that token was a MagicPIG
candidate against the mean predicted u (a calibration check: the prediction uses the angle, the
outcome the hash tables), the same u without centring, and the divergent steps in detail.
"""
import csv
import math
import sys
from collections import defaultdict


def wilson(k, n, z=1.96):
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (c - h, c + h)


def load(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def main(dirs):
    rows = []
    for d in dirs:
        keys = load(f"{d}/keys.csv")
        best = {}
        for r in keys:
            k = (d, r["sample"], r["step"], r["layer"], r["head"])
            if k not in best or float(r["dense_w"]) > float(best[k]["dense_w"]):
                best[k] = r
        rows += [r | {"dir": d} for r in best.values() if float(r["dense_w"]) >= 0.5 and r["exact"] == "0"]
    by_head = defaultdict(list)
    for r in rows:
        by_head[(r["layer"], r["head"])].append(r)
    print("| layer.head | head-steps | needle a candidate | Wilson 95% | mean predicted u | mean u without centring "
          "| mean cos centred | mean cos raw | mean exact weight |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|")
    for key in sorted(by_head, key=lambda k: (int(k[0]), int(k[1]))) + ["all"]:
        rs = rows if key == "all" else by_head[key]
        n = len(rs)
        k = sum(r["candidate"] == "1" for r in rs)
        lo, hi = wilson(k, n)
        mean = lambda f: sum(float(r[f]) for r in rs) / n
        name = "all" if key == "all" else f"{key[0]}.{key[1]}"
        print(f"| {name} | {n} | {k} ({k / n:.3f}) | [{lo:.3f}, {hi:.3f}] | {mean('u'):.3f} | {mean('u_raw'):.3f} "
              f"| {mean('cos_centred'):.3f} | {mean('cos_raw'):.3f} | {mean('dense_w'):.4f} |")
    heads = [r for d in dirs for r in load(f"{d}/heads.csv")]
    if heads and "expected_candidates" in heads[0]:
        n = len(heads)
        mean = lambda f: sum(float(r[f]) for r in heads) / n
        print()
        print(f"Candidates per sparse head-step ({n}): measured {mean('n_candidates'):.1f}, expected (sum of u over "
              f"the hashed keys) {mean('expected_candidates'):.1f}, expected without centring "
              f"{mean('expected_candidates_raw'):.1f}")
    print()
    print("Divergent steps (the step whose MagicPIG argmax first differs from the exact answer):")
    print()
    print("| run | sample | step | layer.head | needle token | exact weight | candidate | collisions | cos centred "
          "| cos raw | u | u raw | MagicPIG weight |")
    print("|---|---:|---:|---|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for r in sorted(rows, key=lambda r: (r["dir"], int(r["sample"]), int(r["layer"]), int(r["head"]))):
        if r["diverged"] != "1":
            continue
        print(f"| {r['dir']} | {r['sample']} | {r['step']} | {r['layer']}.{r['head']} | {r['pos']} '{r['token']}' "
              f"| {float(r['dense_w']):.4f} | {'yes' if r['candidate'] == '1' else 'no'} | {r['collisions']} "
              f"| {float(r['cos_centred']):.3f} | {float(r['cos_raw']):.3f} | {float(r['u']):.3f} "
              f"| {float(r['u_raw']):.3f} | {float(r['mp_w']):.4f} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
