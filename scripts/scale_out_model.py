#!/usr/bin/env python3
"""Paper model of context-parallel decode (docs/scale-out.md): tokens/s of Llama-3.1-8B per
context, host count, network and policy, from the bytes magicpig exchanges (measured, see the
doc) and published network figures. Every assumption is a named constant below."""

# Llama-3.1-8B
LAYERS, HEADS, KV_HEADS, HEAD_DIM = 32, 32, 8, 128
KV_BYTES_PER_TOKEN = LAYERS * 2 * KV_HEADS * HEAD_DIM * 2       # bf16 K and V: 128 KiB
DECODE_PART_BYTES = HEADS * (HEAD_DIM + 1) * 4                   # per rank per layer: out + lse, f32
WEIGHT_BYTES = 4.9e9                                             # Q4_K_M file, read once per token
HOST_MEM_BW = 200e9                                              # effective bytes/s a host streams
# MagicPIG (K=10, L=150) on a shard: 2 of 32 layers stay dense; on the other 30 a step takes
# 1/4 of dense's time (docs/attention.md measures 3.2-5.1x with one thread at 128k here).
MAGICPIG_ATTENTION_FRACTION = 2 / 32 + 30 / 32 / 4

# (name, per-message latency s, bandwidth bytes/s)
NETWORKS = [
    ("25 GbE (TCP)", 20e-6, 25e9 / 8),
    ("100 GbE (TCP)", 15e-6, 100e9 / 8),
    ("IB HDR 200G", 1.0e-6, 200e9 / 8),
    ("IB NDR 400G", 1.0e-6, 400e9 / 8),
]


def allgather_s(hosts, part_bytes, latency, bandwidth):
    # recursive doubling: log2(P) rounds, (P - 1) parts received in all
    rounds = max(1, (hosts - 1).bit_length())
    return rounds * latency + (hosts - 1) * part_bytes / bandwidth


def token_s(ctx, hosts, policy, net):
    _, lat, bw = net
    weights = WEIGHT_BYTES / HOST_MEM_BW
    attention = ctx / hosts * KV_BYTES_PER_TOKEN / HOST_MEM_BW
    if policy == "magicpig":
        attention *= MAGICPIG_ATTENTION_FRACTION
    network = LAYERS * allgather_s(hosts, DECODE_PART_BYTES, lat, bw)
    network += allgather_s(hosts, 4, lat, bw)  # the sampled token, broadcast
    return weights, attention, network


def main():
    print(f"KV per token {KV_BYTES_PER_TOKEN} B; decode exchange {DECODE_PART_BYTES} B per rank per layer")
    print("| context | hosts | policy | network | weights ms | attention ms | network ms | tokens/s | network share |")
    print("|---|---:|---|---|---:|---:|---:|---:|---:|")
    for ctx_name, ctx in (("1M", 1 << 20), ("4M", 1 << 22)):
        for hosts in (8, 32):
            for policy in ("dense", "magicpig"):
                for net in NETWORKS:
                    w, a, n = token_s(ctx, hosts, policy, net)
                    total = w + a + n
                    print(f"| {ctx_name} | {hosts} | {policy} | {net[0]} | {w*1e3:.1f} | {a*1e3:.1f} | "
                          f"{n*1e3:.2f} | {1/total:.1f} | {n/total:.0%} |")


if __name__ == "__main__":
    main()
