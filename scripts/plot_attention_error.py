#!/usr/bin/env python3
"""Plots of `magicpig eval attention-error` (docs/eval_attention.md).

Usage: python3 scripts/plot_attention_error.py DIR
Reads DIR/summary.csv and DIR/attention_error_layers.csv (written by the tool) and writes
DIR/error_vs_cost.png (mean relative L2 error over sparse layers vs cost, log-log, one curve per
policy through its configurations) and DIR/error_per_layer.png (mean error per layer, one line
per configuration; layers a policy runs exactly have error 0 and are left out of the log axis).
Needs matplotlib (Debian: apt-get install python3-matplotlib).
"""
import csv
import math
import os
import sys

from plot_common import out_dir_and_pyplot


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def label(row):
    return row["policy"] + (":" + row["params"] if row["params"] else "")


def main():
    out, plt = out_dir_and_pyplot("plot_attention_error.py")
    from matplotlib.ticker import MaxNLocator
    summary = read_csv(os.path.join(out, "summary.csv"))
    layers = read_csv(os.path.join(out, "attention_error_layers.csv"))

    # Error vs cost: configurations of one policy form a curve ordered by cost.
    fig, ax = plt.subplots(figsize=(7, 5))
    by_policy = {}
    for r in summary:
        err, cost = float(r["mean_rel_l2_sparse"]), float(r["cost"])
        if err > 0 and math.isfinite(err) and cost > 0:  # dense (error 0) has no place on a log axis
            by_policy.setdefault(r["policy"], []).append((cost, err, r["params"]))
    markers = "osD^vP*X"
    for i, (name, pts) in enumerate(sorted(by_policy.items())):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=markers[i % len(markers)], label=name)
        for cost, err, params in pts:
            if len(pts) > 1:
                ax.annotate(params, (cost, err), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("cost: prompt keys read / prompt keys (sparse layers)")
    ax.set_ylabel("mean relative L2 error of the attention output")
    ax.set_title("Attention error vs cost")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "error_vs_cost.png"), dpi=150)
    plt.close(fig)

    # Error per layer, one line per configuration.
    fig, ax = plt.subplots(figsize=(8, 5))
    series = {}
    for r in layers:
        series.setdefault(label(r), []).append((int(r["layer"]), float(r["mean_rel_l2"])))
    any_positive = False
    for name, pts in series.items():
        pts.sort()
        ys = [e if e > 0 else float("nan") for _, e in pts]
        any_positive |= any(e > 0 for _, e in pts)
        ax.plot([l for l, _ in pts], ys, marker=".", label=name)
    if any_positive:
        ax.set_yscale("log")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("layer")
    ax.set_ylabel("mean relative L2 error (gaps: exact layers)")
    ax.set_title("Attention error per layer")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "error_per_layer.png"), dpi=150)
    plt.close(fig)
    print("wrote " + os.path.join(out, "error_vs_cost.png") + " and " + os.path.join(out, "error_per_layer.png"))


if __name__ == "__main__":
    main()
