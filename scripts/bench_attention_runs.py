#!/usr/bin/env python3
"""Runs bench_magicpig several times (one process each) and prints per-benchmark medians and the
per-run ratios that docs/results.md quotes: dense / MagicPIG (10,150) and dense's share of the
same run's read bandwidth (fastest reader). This VM's memory system drifts within minutes, so
ratios are taken inside each run, then their median over runs.

  scripts/bench_attention_runs.py [--runs 5] [--bin build/bin/bench_magicpig] [--isa avx2]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

FILTER = ("BM_ReadBandwidth/reader:[12]|BM_Dense/(65536|131072)/|BM_MagicPig/(65536|131072)/10/150/"
          "|BM_MagicPigGatherFloor|BM_Retrieve")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--bin", default="build/bin/bench_magicpig")
    ap.add_argument("--isa", help="MAGICPIG_ISA for the runs (scalar, avx2, avx512)")
    ap.add_argument("--filter", default=FILTER)
    a = ap.parse_args()
    if a.runs < 1:
        sys.exit("--runs must be >= 1")
    env = dict(os.environ)
    if a.isa:
        env["MAGICPIG_ISA"] = a.isa
    times, ratios = {}, {}
    for r in range(a.runs):
        out = subprocess.run([a.bin, f"--benchmark_filter={a.filter}", "--benchmark_format=json"],
                             env=env, check=True, capture_output=True, text=True).stdout
        per = {}
        for b in json.loads(out)["benchmarks"]:
            name = b["name"].split("/min_time")[0]
            per[name] = b
            times.setdefault(name, []).append(b["real_time"])
        readers = [b["bytes_per_second"] for n, b in per.items() if "ReadBandwidth" in n]
        for n in ("65536", "131072"):
            dense, pig = per.get(f"BM_Dense/{n}"), per.get(f"BM_MagicPig/{n}/10/150")
            if dense and pig:
                ratios.setdefault(f"dense / magicpig(10,150) at {n}", []).append(dense["real_time"] / pig["real_time"])
            if dense and readers:
                gbs = dense["MB_read"] * 1e6 / (dense["real_time"] * 1e-3)
                ratios.setdefault(f"dense % of read bandwidth at {n}", []).append(100 * gbs / max(readers))
        print(f"run {r + 1}/{a.runs} done", file=sys.stderr)
    for name, v in times.items():
        print(f"{name:42s} median {statistics.median(v):8.3f} ms   runs: {' '.join(f'{x:.3f}' for x in v)}")
    for name, v in ratios.items():
        print(f"{name:42s} median {statistics.median(v):8.2f}      runs: {' '.join(f'{x:.2f}' for x in v)}")


if __name__ == "__main__":
    main()
