#!/usr/bin/env python3
"""Where magicpig-adaptive's budget goes: mean fraction of prompt keys read per (layer, query
head) from an `eval attention-error` run (attention_error.csv, `keys` and `rung` columns), one
heat map per magicpig-adaptive configuration, and a last panel with the cost per sparse layer of
every policy in the run (attention_error_layers.csv; fixed magicpig for reference) and, dashed,
the part of each adaptive configuration's cost paid by exact fallbacks.

usage: scripts/plot_adaptive_cost.py DIR N_PROMPT OUT.png [TITLE]
"""
import collections
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def eps_of(params):
    return params.split("eps=")[1].split(":")[0]


def label_of(policy, params):
    if policy == "magicpig-adaptive":
        return "adaptive eps=" + eps_of(params)
    kl = [kv for kv in params.split(":") if kv.startswith(("K=", "L="))]
    return policy + " (" + ",".join(v.split("=")[1] for v in kl) + ")"


def mean(v):
    return sum(v) / len(v)


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    d, n_prompt, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    title = sys.argv[4] if len(sys.argv) == 5 else "magicpig-adaptive: cost per layer and head"
    cells = collections.defaultdict(lambda: collections.defaultdict(list))  # adaptive: (layer, head) -> costs
    per_layer = collections.defaultdict(lambda: collections.defaultdict(list))  # every policy: layer -> costs
    exact_layer = collections.defaultdict(lambda: collections.defaultdict(list))  # adaptive: cost of exact rows
    for r in csv.DictReader(open(d + "/attention_error.csv")):
        if r["keys"] == "":  # dense layers claim nothing
            continue
        cost = float(r["keys"]) / n_prompt
        label = label_of(r["policy"], r["params"])
        layer = int(r["layer"])
        if r["policy"] == "magicpig-adaptive":
            cells[label][(layer, int(r["head"]))].append(cost)
            exact_layer[label][layer].append(cost if r["rung"] == "exact" else 0.0)
    for r in csv.DictReader(open(d + "/attention_error_layers.csv")):
        if r["sparse"] == "1":
            per_layer[label_of(r["policy"], r["params"])][int(r["layer"])].append(float(r["cost"]))
    configs = sorted(cells, key=lambda p: float(p.split("eps=")[1]))
    if not configs:
        sys.exit("no magicpig-adaptive rows with a keys column in " + d)
    fig, axes = plt.subplots(1, len(configs) + 1, figsize=(3.6 * len(configs) + 5, 6), squeeze=False,
                             gridspec_kw={"width_ratios": [1] * len(configs) + [1.6]})
    im = None
    for ax, p in zip(axes[0], configs):
        c = cells[p]
        layers = sorted({l for l, _ in c})
        heads = sorted({h for _, h in c})
        grid = [[mean(c[(l, h)]) for h in heads] for l in layers]
        im = ax.imshow(grid, aspect="auto", cmap="viridis", vmin=0, vmax=1)
        ax.set_yticks(range(len(layers)))
        ax.set_yticklabels(layers, fontsize=7)
        ax.set_xticks(range(len(heads)))
        ax.tick_params(axis="x", labelsize=7)
        ax.set_xlabel("query head")
        if p == configs[0]:
            ax.set_ylabel("layer (sparse)")
        total = mean([x for v in c.values() for x in v])
        ax.set_title("%s: mean %.3f" % (p, total), fontsize=9)
    fig.colorbar(im, ax=axes[0][: len(configs)].tolist(), label="prompt keys read / prompt keys", shrink=0.8)
    ax = axes[0][-1]
    for label in sorted(per_layer, key=lambda s: (s.startswith("adaptive"), s)):
        layers = sorted(per_layer[label])
        line = ax.plot([mean(per_layer[label][l]) for l in layers], layers, marker="o", ms=3, label=label)[0]
        if label in exact_layer:
            ax.plot([mean(exact_layer[label][l]) for l in layers], layers, ls="--", color=line.get_color(), lw=1)
    ax.invert_yaxis()
    ax.set_xlabel("prompt keys read / prompt keys (mean over heads, steps)\ndashed: paid by exact fallbacks")
    ax.set_ylabel("layer")
    ax.set_xlim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title("per layer", fontsize=9)
    fig.suptitle(title)
    fig.savefig(out, dpi=100, bbox_inches="tight")


if __name__ == "__main__":
    main()
