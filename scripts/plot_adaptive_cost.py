#!/usr/bin/env python3
"""Where magicpig-adaptive's budget goes: mean fraction of prompt keys read per (layer, query
head) from an `eval attention-error` run (attention_error.csv, `keys` column), one heat map per
magicpig-adaptive configuration, plus fixed magicpig's per-layer cost for reference.

usage: scripts/plot_adaptive_cost.py DIR N_PROMPT OUT.png
"""
import collections
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    d, n_prompt, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    keys = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in csv.DictReader(open(d + "/attention_error.csv")):
        if r["policy"] == "magicpig-adaptive" and r["keys"]:
            keys[r["params"]][(int(r["layer"]), int(r["head"]))].append(float(r["keys"]) / n_prompt)
    configs = sorted(keys, key=lambda p: float(p.split("eps=")[1].split(":")[0]))
    fig, axes = plt.subplots(1, len(configs), figsize=(4.2 * len(configs), 6), squeeze=False)
    for ax, p in zip(axes[0], configs):
        cells = keys[p]
        layers = sorted({l for l, _ in cells})
        heads = sorted({h for _, h in cells})
        grid = [[sum(cells[(l, h)]) / len(cells[(l, h)]) for h in heads] for l in layers]
        im = ax.imshow(grid, aspect="auto", cmap="viridis", vmin=0, vmax=1)
        ax.set_yticks(range(len(layers)))
        ax.set_yticklabels(layers, fontsize=7)
        ax.set_xticks(range(len(heads)))
        ax.set_xlabel("query head")
        ax.set_ylabel("layer (sparse)")
        total = sum(sum(v) for v in cells.values()) / sum(len(v) for v in cells.values())
        ax.set_title("eps=%s: mean %.3f" % (p.split("eps=")[1].split(":")[0], total), fontsize=9)
    fig.colorbar(im, ax=axes[0].tolist(), label="prompt keys read / prompt keys")
    fig.suptitle("magicpig-adaptive: cost per layer and head")
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
