#!/usr/bin/env python3
"""Heat maps of `magicpig calibrate` (docs/calibration.md).

Usage: python3 scripts/plot_calibration.py DIR
Reads DIR/heads.csv (one row per sparse layer and KV head) and writes DIR/heads.png: four maps,
KV head across and layer down, of the recall of the exact attention mass, the needle mass the
sampler is expected to miss, the top key's sampling probability and the relative output error.
Heads the profile makes exact are boxed; dense layers are blank.
Needs matplotlib (Debian: apt-get install python3-matplotlib).
"""
import csv
import math
import os
import sys

from plot_common import out_dir_and_pyplot


def main():
    out, plt = out_dir_and_pyplot("plot_calibration.py")
    from matplotlib.patches import Rectangle
    with open(os.path.join(out, "heads.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit("plot_calibration.py: heads.csv has no rows")
    n_layer = max(int(r["layer"]) for r in rows) + 1
    n_kv = max(int(r["kv_head"]) for r in rows) + 1
    panels = [("recall", "recall of the attention mass", "viridis", 0, 1),
              ("missed", "needle mass missed", "magma_r", 0, None),
              ("top_u", "top key's sampling probability", "viridis", 0, 1),
              ("rel_l2", "relative output error", "magma_r", 0, None)]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 0.28 * n_layer + 1.6), squeeze=False)
    for ax, (col, title, cmap, lo, hi) in zip(axes[0], panels):
        grid = [[math.nan] * n_kv for _ in range(n_layer)]
        for r in rows:
            grid[int(r["layer"])][int(r["kv_head"])] = float(r[col])
        vmax = hi if hi is not None else max(max(v for v in row if not math.isnan(v)) for row in grid
                                             if any(not math.isnan(v) for v in row))
        im = ax.imshow(grid, cmap=cmap, vmin=lo, vmax=vmax or 1, aspect="auto", interpolation="nearest")
        for r in rows:
            if r["exact"] == "1":
                ax.add_patch(Rectangle((int(r["kv_head"]) - 0.5, int(r["layer"]) - 0.5), 1, 1, fill=False,
                                       edgecolor="red", linewidth=1.5))
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("KV head")
        ax.set_ylabel("layer")
        ax.set_xticks(range(n_kv))
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    fig.suptitle("magicpig calibrate: per-head diagnosis (red: exact in the profile; blank: dense layer)", fontsize=10)
    fig.tight_layout()
    path = os.path.join(out, "heads.png")
    fig.savefig(path, dpi=110)
    print(path)


if __name__ == "__main__":
    main()
