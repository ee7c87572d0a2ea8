#!/usr/bin/env python3
"""Decode tokens/s vs context: magicpig bench JSON + llama-bench JSON -> table.md and
decode_vs_context.png (scripts/bench_decode_chart.sh runs this)."""
import json, os, sys


def rows(path, engine):
    out = []
    for r in json.load(open(path)):
        if r.get("n_gen", 0) == 0 or r.get("n_prompt", 0) != 0:
            continue
        label = engine if engine == "llama.cpp" else f"magicpig {r['attn']}" + (
            f" ({r['setting']})" if r.get("attn") == "magicpig" and r.get("setting") else "")
        if r.get("n_seq", 1) != 1:
            label += f" x{r['n_seq']}"
        out.append((label, int(r["n_depth"]), float(r["avg_ts"]), float(r["stddev_ts"])))
    return out


def main():
    mp_json, lc_json, out = sys.argv[1:4]
    data = rows(mp_json, "magicpig") + rows(lc_json, "llama.cpp")
    if not data:
        raise SystemExit("no decode rows in the inputs")
    labels = sorted({d[0] for d in data})
    depths = sorted({d[1] for d in data})
    by = {(d[0], d[1]): d for d in data}
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write("| engine / attention | " + " | ".join(f"d={x}" for x in depths) + " |\n")
        f.write("|---|" + "---:|" * len(depths) + "\n")
        for lab in labels:
            cells = [f"{by[(lab, x)][2]:.2f} ± {by[(lab, x)][3]:.2f}" if (lab, x) in by else "" for x in depths]
            f.write(f"| {lab} | " + " | ".join(cells) + " |\n")
    print(open(os.path.join(out, "table.md")).read())
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing (apt-get install python3-matplotlib): table only", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for lab in labels:
        pts = sorted((d[1], d[2], d[3]) for d in data if d[0] == lab)
        ax.errorbar([max(p[0], 1) for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts], marker="o",
                    capsize=3, label=lab)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context already in the cache (tokens)")
    ax.set_ylabel("decode tokens/s")
    ax.set_title("Decode speed vs context")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "decode_vs_context.png"), dpi=120)
    print("wrote", os.path.join(out, "decode_vs_context.png"))


if __name__ == "__main__":
    main()
