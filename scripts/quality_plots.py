#!/usr/bin/env python3
"""Extra plots for docs/history/quality-2026-12-05.md from a `magicpig eval attention-error` folder (DIR).
  DIR/topk_vs_sampling.png : the paper's Fig. 3 view: mean relative L2 error (sparse layers) of
      TopK and oracle sampling against the budget (TopK: keys read; sampling: draws B/n), with the
      MagicPIG configurations at their measured cost and sampling also at its distinct-keys cost.
  DIR/long_tail_per_layer.png : per layer, (a) TopK error at each budget (a long tail = high error
      even when the top keys are kept), (b) distinct keys read by oracle sampling / draws (low =
      peaked attention, most draws hit the same few keys).
Usage: plot_quality.py DIR OUT_PREFIX [TITLE]"""
import csv, os, sys, collections
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
d, prefix = sys.argv[1], sys.argv[2]
title = sys.argv[3] if len(sys.argv) > 3 else ""
def rd(p): return list(csv.DictReader(open(os.path.join(d, p), newline="")))
def par(s):
    out = {}
    for kv in s.split(":"):
        if "=" in kv: k, v = kv.split("=", 1); out[k] = v
    return out
S = rd("summary.csv"); Ly = rd("attention_error_layers.csv")
fig, ax = plt.subplots(figsize=(7.5, 5.2))
curves = collections.defaultdict(list)
for r in S:
    p = par(r["params"]); e = float(r["mean_rel_l2_sparse"]); c = float(r["cost"])
    if r["policy"] == "topk": curves["TopK (x = keys read = budget)"].append((float(p["budget"]), e))
    elif r["policy"] == "oracle-sampling":
        curves["oracle sampling (x = draw budget B/n)"].append((float(p["budget"]), e))
        curves["oracle sampling (x = distinct keys read)"].append((c, e))
    elif r["policy"] == "magicpig": curves["MagicPIG (x = measured keys read)"].append((c, e, "K=%s,L=%s" % (p["K"], p["L"])))
    elif r["policy"] == "quest": curves["Quest (x = measured keys read)"].append((c, e))
    elif r["policy"] == "streaming": curves["streaming (x = measured keys read)"].append((c, e))
sty = {"TopK": ("C0", "o", "-"), "oracle sampling (x = draw": ("C1", "s", "-"), "oracle sampling (x = distinct": ("C1", "s", ":"),
       "MagicPIG": ("C2", "D", "none"), "Quest": ("C3", "^", "-"), "streaming": ("C4", "v", "-")}
for name, pts in curves.items():
    pts.sort()
    col, mk, ls = next(v for k, v in sty.items() if name.startswith(k))
    ax.plot([q[0] for q in pts], [q[1] for q in pts], marker=mk, color=col, linestyle=ls, label=name,
            markerfacecolor="none" if "distinct" in name else col)
    for q in pts:
        if len(q) > 2: ax.annotate(q[2], (q[0], q[1]), fontsize=7, xytext=(4, 3), textcoords="offset points")
ax.set_xscale("log"); ax.set_yscale("log")
ax.set_xlabel("budget / fraction of prompt keys read (sparse layers)")
ax.set_ylabel("mean relative L2 error of attention output")
ax.set_title("TopK vs sampling at equal budget " + title)
ax.grid(True, which="both", alpha=0.3); ax.legend(fontsize=8)
fig.tight_layout(); fig.savefig(prefix + "topk_vs_sampling.png", dpi=130); plt.close(fig)

fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.8))
tk = collections.defaultdict(dict); os_ = collections.defaultdict(dict)
for r in Ly:
    if r["sparse"] not in ("1", "true", "True"): continue
    p = par(r["params"]); l = int(r["layer"])
    if r["policy"] == "topk": tk[float(p["budget"])][l] = float(r["mean_rel_l2"])
    if r["policy"] == "oracle-sampling": os_[float(p["budget"])][l] = float(r["cost"]) / float(p["budget"])
cm = plt.get_cmap("viridis")
for i, b in enumerate(sorted(tk)):
    xs = sorted(tk[b]); a1.plot(xs, [tk[b][x] for x in xs], marker=".", color=cm(i / max(1, len(tk) - 1)), label=f"TopK {b:g}")
a1.set_yscale("log"); a1.set_xlabel("layer"); a1.set_ylabel("TopK relative L2 error")
a1.set_title("error left by keeping the top keys (high = long tail)"); a1.grid(True, which="both", alpha=0.3); a1.legend(fontsize=7)
for i, b in enumerate(sorted(os_)):
    xs = sorted(os_[b]); a2.plot(xs, [os_[b][x] for x in xs], marker=".", color=cm(i / max(1, len(os_) - 1)), label=f"B/n = {b:g}")
a2.set_xlabel("layer"); a2.set_ylabel("distinct keys drawn / draws")
a2.set_title("oracle sampling: distinct keys per draw (low = peaked)"); a2.grid(True, alpha=0.3); a2.legend(fontsize=7)
fig.suptitle("How long-tailed attention is, per layer " + title)
fig.tight_layout(); fig.savefig(prefix + "long_tail_per_layer.png", dpi=130); plt.close(fig)
print("wrote", prefix + "topk_vs_sampling.png", prefix + "long_tail_per_layer.png")
