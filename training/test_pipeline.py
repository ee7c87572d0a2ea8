#!/usr/bin/env python3
"""Fast self-checks of the training pipeline (about a minute on one core):
  1. RoPE: apply_rope equals llama.cpp's adjacent-pair rotation written with complex numbers.
  2. GQA/attention: the model's causal attention equals a per-head loop reference.
  3. Exact resume: 6 steps in one go == 3 steps, checkpoint, resume, 3 more (bit-identical); a
     second train.py on a run dir in use stops at once (lock file).
  4. Export: the GGUF written by export_gguf.py parses back (own reader) with the right
     metadata, tensor shapes, and F16 data equal to the checkpoint rounded to f16.
  5. Import (train.py --init-gguf): the GGUF's weights come back and a run starts from them;
     with --init-step N it starts at step N of the curriculum (a committed checkpoint's step),
     its rate ramped up again over 20 steps. checkpoint.load (the evaluation tools' loader)
     reads the .pt and the GGUF into the same model.
  6. Episodes: a noise-haystack needle is set in RULER's filler line; single_far / single_veryfar needles sit early; a word -> uuid needle's answer tokens decode to its uuid (RULER's format), the
     needle and question are in the sequence, and only the answer (+ EOS) carries the mask.
  7. Depth growth (train.py --grow-new-layers): a trained model grown by two fresh blocks gives
     the same logits, the old blocks land at the other indices, and after one optimizer step the
     fresh blocks' residual projections are no longer zero (they train).
  8. Head growth (train.py --grow-heads): a trained model grown from 2 to 4 query heads (1 to 2
     KV heads, same head_dim) gives the same logits, the fresh heads' output columns train away
     from zero, a GQA group change is an error; end to end, a grown run exports with
     llama.attention.key_length and imports back to its config.
  python3 training/test_pipeline.py     (needs the tokenizer and token arrays)
"""
import fcntl, json, os, struct, subprocess, sys, tempfile
import common  # first: it runs this script in the training environment (common.py)
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from model import Config, Llama, apply_rope, causal_attention, rope_tables, grow_depth, grow_heads

torch.set_num_threads(1)
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


# 1. RoPE convention -----------------------------------------------------------------------
D, T, theta = 8, 5, 10000.0
x = torch.randn(1, 1, T, D)
cos, sin = rope_tables(D, torch.arange(T), theta)
got = apply_rope(x, cos, sin)
ref = torch.empty_like(x)
for p in range(T):
    for i in range(D // 2):
        z = complex(x[0, 0, p, 2 * i], x[0, 0, p, 2 * i + 1]) * np.exp(1j * p * theta ** (-2 * i / D))
        ref[0, 0, p, 2 * i], ref[0, 0, p, 2 * i + 1] = z.real, z.imag
check(torch.allclose(got, ref, atol=1e-5), "RoPE rotates adjacent pairs (GGUF/llama.cpp convention)")

# 2. attention with GQA against a loop reference ----------------------------------------------
c = Config(vocab_size=50, dim=32, n_layers=1, n_heads=4, n_kv_heads=2, ffn_dim=48)
torch.manual_seed(0)
m = Llama(c); b = m.blocks[0]
h = torch.randn(1, 6, c.dim)
with torch.no_grad():
    cos, sin = rope_tables(c.head_dim, torch.arange(6), c.rope_theta)
    out = b(h, cos, sin)
    a = b.attn_norm(h)
    q = apply_rope(b.attn_q(a).view(1, 6, 4, 8).transpose(1, 2), cos, sin)
    k = apply_rope(b.attn_k(a).view(1, 6, 2, 8).transpose(1, 2), cos, sin)
    v = b.attn_v(a).view(1, 6, 2, 8).transpose(1, 2)
    o = torch.zeros(1, 6, 4, 8)
    for hh in range(4):
        kv = hh // 2  # query head h reads KV head h // group
        for t in range(6):
            s = torch.softmax(torch.stack([q[0, hh, t] @ k[0, kv, u] / 8 ** 0.5 for u in range(t + 1)]), 0)
            o[0, t, hh] = sum(s[u] * v[0, kv, u] for u in range(t + 1))
    x1 = h + b.attn_output(o.reshape(1, 6, 32))
    f = b.ffn_norm(x1)
    ref = x1 + b.ffn_down(torch.nn.functional.silu(b.ffn_gate(f)) * b.ffn_up(f))
check(torch.allclose(out, ref, atol=1e-5), "causal GQA attention + SwiGLU block equals the loop reference")
# the blocked causal attention (query blocks against the keys they see) equals the full T x T
# form, for T below, at and across several block boundaries
for T, chunk in ((5, 8), (8, 8), (11, 4), (13, 3)):
    qa, ka, va = (torch.randn(2, 3, T, 8) for _ in range(3))
    full = torch.softmax(qa @ ka.transpose(-1, -2) / 8 ** 0.5 + torch.full((T, T), float("-inf")).triu(1), -1) @ va
    check(torch.allclose(causal_attention(qa, ka, va, chunk), full, atol=1e-6),
          f"blocked causal attention equals the full form (T={T}, block {chunk})")

# 3. exact resume ------------------------------------------------------------------------------
cur = {"seed": 7, "model": {"dim": 64, "n_layers": 2, "n_heads": 2, "n_kv_heads": 1, "ffn_dim": 96, "max_seq_len": 256},
       "stages": [{"name": "a", "steps": 3, "seq_len": 96, "batch": 2, "lr": 1e-3, "warmup": 2, "text_weight": 0.1,
                   "mix": {"single": 1, "multiquery": 1, "text": 1}},
                  {"name": "b", "steps": 3, "seq_len": 128, "batch": 2, "lr": 1e-3, "warmup": 1, "text_weight": 0.1,
                   "eval_distractors": 2, "mix": {"multikey": 1, "multivalue": 1, "vartrack": 1}}]}
with tempfile.TemporaryDirectory() as tmp:
    cf = os.path.join(tmp, "cur.json"); json.dump(cur, open(cf, "w"))
    run = lambda d, *extra: subprocess.run([sys.executable, os.path.join(HERE, "train.py"), "--curriculum", cf,
                                            "--run-dir", os.path.join(tmp, d), "--log-every", "1", "--eval-every", "100",
                                            "--eval-n", "2", *extra], check=True, capture_output=True, text=True)
    run("one")
    run("two", "--stop-at-step", "3")
    run("two")
    with open(os.path.join(tmp, "one", "lock"), "w") as held:  # as if another train.py ran on "one"
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        busy = subprocess.run([sys.executable, os.path.join(HERE, "train.py"), "--curriculum", cf, "--run-dir",
                               os.path.join(tmp, "one")], capture_output=True, text=True)
    check(busy.returncode != 0 and "another train.py is using" in busy.stderr,
          "a second train.py on a run dir in use stops with a clear error")
    a = torch.load(os.path.join(tmp, "one", "ckpt.pt")); b = torch.load(os.path.join(tmp, "two", "ckpt.pt"))
    check(a["step"] == b["step"] == 6 and a["tokens"] == b["tokens"], "resume reaches the same step and token count")
    check(all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"]), "resumed weights are bit-identical to an uninterrupted run")
    rows = open(os.path.join(tmp, "one", "log.csv")).read().splitlines()
    check(len(rows) == 7 and rows[0].startswith("step,tokens"), "log.csv has a header and one row per logged step")
    mk = [open(os.path.join(tmp, d, "eval_multikey.csv")).read().splitlines() for d in ("one", "two")]
    check(mk[0] == mk[1] and len(mk[0]) == 2 and mk[0][1].startswith("6,") and mk[0][1].split(",")[3] == "2",
          "a stage with eval_distractors logs its multi-key accuracy (once, at its end; same after a resume)")

    # 4. export ------------------------------------------------------------------------------
    g = os.path.join(tmp, "m.gguf")
    subprocess.run([sys.executable, os.path.join(HERE, "export_gguf.py"), "--ckpt", os.path.join(tmp, "one", "ckpt.pt"), "-o", g],
                   check=True, capture_output=True)
    buf = open(g, "rb").read()
    pos = 0
    def rd(fmt):
        global pos
        v = struct.unpack_from("<" + fmt, buf, pos); pos += struct.calcsize("<" + fmt); return v if len(v) > 1 else v[0]
    def rs():
        global pos
        n = rd("Q"); s = buf[pos:pos + n].decode(); pos += n; return s
    sizes = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
    def val(t):
        if t == 8: return rs()
        if t == 9:
            et, n = rd("I"), rd("Q"); return [val(et) for _ in range(n)]
        return rd(sizes[t])
    check(buf[:4] == b"GGUF", "GGUF magic"); pos = 4
    ver, nt, nkv = rd("I"), rd("Q"), rd("Q")
    meta = {}
    for _ in range(nkv):
        k = rs(); meta[k] = val(rd("I"))
    infos = []
    for _ in range(nt):
        n = rs(); nd = rd("I"); ne = [rd("Q") for _ in range(nd)]; infos.append((n, ne, rd("I"), rd("Q")))
    data0 = (pos + 31) // 32 * 32
    check(ver == 3 and meta["general.architecture"] == "llama" and meta["llama.block_count"] == 2
          and meta["llama.attention.head_count_kv"] == 1 and meta["llama.rope.dimension_count"] == 32
          and meta["tokenizer.ggml.model"] == "llama", "GGUF llama metadata")
    toks, types = meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.token_type"]
    check(types[0] == 2 and types[1] == 3 and types[2] == 3 and types[3] == 6 and toks[3] == "<0x00>" and types[300] == 1,
          "token types: unk 2, control 3, byte 6, normal 1")
    st = a["model"]; byname = {n: (ne, t, off) for n, ne, t, off in infos}
    ne, t, off = byname["blk.1.attn_k.weight"]
    w = st["blocks.1.attn_k.weight"]
    arr = np.frombuffer(buf, dtype="<f2", count=w.numel(), offset=data0 + off).reshape(w.shape)
    check(ne == [64, 32] and t == 1 and np.array_equal(arr, w.numpy().astype(np.float16)), "blk.1.attn_k.weight: ne [in, out], F16 data equal")
    ne, t, off = byname["output_norm.weight"]
    check(t == 0 and ne == [64], "norms are F32")
    check(len(infos) == 2 + 2 * 9 + 1, "tensor count (embedding, 9 per block, output norm, output)")

    # 5. import: a run started from the GGUF (--init-gguf) holds the checkpoint's weights rounded to f16
    import gguf_import
    state, gmeta = gguf_import.read_state(g)
    check(gguf_import.config_dict(gmeta, state) == a["config"], "gguf_import.config_dict gives back the checkpoint's model config")
    check(set(state) == set(st) and all(torch.equal(state[k], st[k].half().float() if st[k].dim() >= 2 else st[k])
                                        for k in st), "gguf_import reads back every weight (f16-rounded matrices, exact norms)")
    import checkpoint
    m_pt, info_pt = checkpoint.load(os.path.join(tmp, "one", "ckpt.pt"), f16_matrices=True)
    m_gg, info_gg = checkpoint.load(g)
    x = torch.tensor([[1, 5, 9, 2, 7]])
    with torch.no_grad():
        check(info_pt["step"] == a["step"] and info_gg["step"] is None and not m_gg.training
              and torch.equal(m_pt(x), m_gg(x)), "checkpoint.load: the .pt (f16_matrices) and its GGUF give the same logits")
    run("init", "--init-gguf", g, "--stop-at-step", "1")
    c = torch.load(os.path.join(tmp, "init", "ckpt.pt"))
    check(c["step"] == 1 and not torch.equal(c["model"]["blocks.0.attn_q.weight"], state["blocks.0.attn_q.weight"])
          and torch.allclose(c["model"]["blocks.0.attn_q.weight"], state["blocks.0.attn_q.weight"], atol=1e-2),
          "--init-gguf starts from the GGUF's weights and trains on")
    run("initstep", "--init-gguf", g, "--init-step", "3", "--stop-at-step", "4")
    c = torch.load(os.path.join(tmp, "initstep", "ckpt.pt"))
    rows = open(os.path.join(tmp, "initstep", "log.csv")).read().splitlines()
    check(c["step"] == 4 and len(rows) == 2 and rows[1].split(",")[0] == "4" and rows[1].split(",")[2] == "b",
          "--init-step 3 goes on at step 3 (stage b) from the GGUF's weights")
    plain = open(os.path.join(tmp, "one", "log.csv")).read().splitlines()[4].split(",")
    check(plain[0] == "4" and abs(float(rows[1].split(",")[5]) - float(plain[5]) / 20) < 1e-9,
          "--init-step ramps the rate up again (its first step at 1/20 of the schedule's rate)")

    # 8 (end to end). --grow-heads: the 2-head GGUF grows to 4 query / 2 KV heads of the same
    # 32 dims (key_length), trains a step, and exports with llama.attention.key_length
    cf2 = os.path.join(tmp, "cur2.json")
    json.dump({**cur, "model": {**cur["model"], "n_heads": 4, "n_kv_heads": 2, "key_length": 32}}, open(cf2, "w"))
    subprocess.run([sys.executable, os.path.join(HERE, "train.py"), "--curriculum", cf2, "--run-dir",
                    os.path.join(tmp, "heads"), "--init-gguf", g, "--grow-heads", "--stop-at-step", "1",
                    "--eval-every", "100", "--eval-n", "2"], check=True, capture_output=True, text=True)
    c = torch.load(os.path.join(tmp, "heads", "ckpt.pt"))
    check(c["config"]["key_length"] == 32 and c["model"]["blocks.1.attn_q.weight"].shape == (128, 64)
          and torch.allclose(c["model"]["blocks.1.attn_k.weight"][:32], state["blocks.1.attn_k.weight"], atol=1e-2),
          "--grow-heads: 4 heads of 32 dims, the trained KV head first")
    g2 = os.path.join(tmp, "heads.gguf")
    subprocess.run([sys.executable, os.path.join(HERE, "export_gguf.py"), "--ckpt", os.path.join(tmp, "heads", "ckpt.pt"),
                    "-o", g2], check=True, capture_output=True)
    state2, meta2 = gguf_import.read_state(g2)
    check(meta2.get("llama.attention.key_length") == 32 and meta2.get("llama.attention.value_length") == 32
          and meta2["llama.rope.dimension_count"] == 32 and gguf_import.config_dict(meta2, state2) == c["config"],
          "a grown-heads export writes key_length / value_length and imports back to the same config")

# 6. episodes ---------------------------------------------------------------------------------
import re
import data
import sentencepiece as spm
sp = spm.SentencePieceProcessor(model_file=common.tokenizer_model())
maker = data.EpisodeMaker(sp, "train")
rng = np.random.default_rng(5)
for n in (300, 1000):
    ids, w, val = maker.single(rng, n, 0.0, uuid=True)
    ans = [int(t) for t, x in zip(ids, w) if x == 1.0]
    check(len(ids) == n + 1 and len(w) == n + 1, f"uuid episode has seq_len + 1 tokens ({n})")
    check(re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", val) is not None,
          f"uuid value has RULER's version-4 format ({val})")
    check(ans[-1] == maker.eos and sp.decode(ans[:-1]).strip() == val, f"uuid answer tokens decode to the uuid ({n})")
    text = sp.decode([int(t) for t in ids])
    check(f"is: {val}." in text and text.count(val) == 2, "the uuid needle is in the haystack and answered once")

ids, w, val = maker.single(rng, 600, 0.0, noise=True)
text = sp.decode([int(t) for t in ids])
check(len(ids) == 601 and f"is: {val}." in text and text.count("The grass is green.") >= 10
      and not any(c in text for c in "QXZ"), "noise-haystack needle: RULER's filler line repeated around the needle")

# single_far / single_veryfar (and their noise forms): the needle sits in the first part of the
# sequence that FAR_NEEDLE_KINDS gives its kind, the question at its end
for kind, (bound, _) in data.FAR_NEEDLE_KINDS.items():
    good = True
    for _ in range(10):
        ids, w = maker.sample(rng, 2048, {kind: 1}, 0.0)
        text = sp.decode([int(t) for t in ids])
        val = re.findall(r"is: (\d{7})\.", text)
        pos = text.find(f"is: {val[0]}.") if val else -1
        good &= len(ids) == 2049 and len(val) == 1 and 0 <= pos < (bound + 0.03) * len(text)
    check(good, f"{kind}: the needle is in the first {bound:.0%} of the haystack")

# multikey_far: four needles, the asked one (its key in the question) in the first FAR_DEPTH
good = True
for _ in range(10):
    ids, w = maker.sample(rng, 2048, {"multikey_far": 1}, 0.0)
    text = sp.decode([int(t) for t in ids])
    needles = re.findall(r"special magic numbers for (\w+) is: (\d{7})\.", text)
    asked = re.findall(r"special magic number for (\w+) mentioned", text)
    pos = {k: text.find(f"for {k} is: {v}.") for k, v in needles}
    good &= len(ids) == 2049 and len(needles) == 4 and len(asked) >= 1 and asked[0] in pos \
        and 0 <= pos[asked[0]] < (data.FAR_DEPTH + 0.03) * len(text)
check(good, "multikey_far: four needles, the asked one in the first FAR_DEPTH")

# digitcopy_far: the digit string in the first VERY_FAR_DEPTH, its copy (the weighted tokens) at the end
good = True
for _ in range(10):
    ids, w = maker.sample(rng, 2048, {"digitcopy_far": 1}, 0.0)
    k = int(sum(1 for x in w if x > 0))
    copy = ids[-k:]
    first = next(i for i in range(len(ids) - k) if ids[i:i + k] == copy)
    good &= len(ids) == 2049 and k == 40 and all(x > 0 for x in w[-k:]) and first < (data.VERY_FAR_DEPTH + 0.03) * len(ids)
check(good, "digitcopy_far: the first copy is in the first VERY_FAR_DEPTH, the weighted copy at the end")

# kvrecall: every checked answer is the value of a needle earlier in the sequence, and of the
# key its question names; only answer tokens carry weight 1
for n in (192, 384, 1024):
    good = True
    for _ in range(20):
        ids, w = maker.kvrecall(rng, n, 0.0)
        good &= len(ids) == n + 1 and len(w) == n + 1 and w[0] == 0.0
        text = sp.decode([int(t) for t in ids])
        pairs = dict(re.findall(r"magic numbers for (\S+) is: (\d{7})\.", text))
        asked = re.findall(r"The special magic number for (\S+)(?: mentioned in the provided text)? is: (\d{7})\.", text)
        spans, cur = [], []
        for t, x in zip(ids, w):
            if x == 1.0:
                cur.append(int(t))
            elif cur:
                spans.append(cur); cur = []
        if cur:
            spans.append(cur)
        answers = [sp.decode(a).strip().rstrip(".") for a in spans]
        good &= len(asked) >= 1 and len(answers) == len(asked) and len(pairs) >= 2
        good &= all(pairs.get(k) == v and a == v for (k, v), a in zip(asked, answers))
    check(good, f"kvrecall answers are the asked keys' needle values, weighted alone ({n})")
ids, w = maker.kvrecall(rng, 384, 0.0, one_token=True)
keys = re.findall(r"magic numbers for (\S+) is:", sp.decode([int(t) for t in ids]))
check(len(keys) >= 2 and all(len(maker.enc("for " + k)) - len(maker.enc("for")) == 1 for k in keys),
      "kvrecall with one_token=True uses only keys that are one token")

# 7. Depth growth ------------------------------------------------------------------------------
torch.manual_seed(3)
small_cfg = Config(vocab_size=64, dim=32, n_layers=3, n_heads=4, n_kv_heads=2, ffn_dim=48, max_seq_len=64)
small = Llama(small_cfg)
for p_ in small.parameters():  # not the init's zero-ish residual scale: every block must matter
    p_.data.normal_(0, 0.2)
big = Llama(Config(**{**small_cfg.to_dict(), "n_layers": 5}))
big.load_state_dict(grow_depth(big, small.state_dict(), [1, 3]))
ids = torch.randint(0, 64, (2, 20))
check(torch.allclose(big(ids), small(ids), atol=1e-5), "a model grown by two fresh blocks gives the same logits")
check(torch.equal(big.blocks[2].attn_q.weight, small.blocks[1].attn_q.weight)
      and torch.equal(big.blocks[4].ffn_up.weight, small.blocks[2].ffn_up.weight), "old blocks fill the other indices in order")
opt_ = torch.optim.AdamW(big.parameters(), lr=1e-3)
torch.nn.functional.cross_entropy(big(ids).flatten(0, 1), torch.randint(0, 64, (40,))).backward()
opt_.step()
check(big.blocks[1].attn_output.weight.abs().sum() > 0 and big.blocks[3].ffn_down.weight.abs().sum() > 0,
      "the fresh blocks' residual projections train away from zero")
try:
    grow_depth(big, small.state_dict(), [1]); bad = False
except ValueError:
    bad = True
check(bad, "a wrong count of new block indices is an error")

# 8. Head growth -------------------------------------------------------------------------------
torch.manual_seed(4)
narrow_cfg = Config(vocab_size=64, dim=32, n_layers=2, n_heads=2, n_kv_heads=1, ffn_dim=48, max_seq_len=64)
narrow = Llama(narrow_cfg)
for p_ in narrow.parameters():
    p_.data.normal_(0, 0.2)
wide = Llama(Config(**{**narrow_cfg.to_dict(), "n_heads": 4, "n_kv_heads": 2, "key_length": 16}))
wide.load_state_dict(grow_heads(wide, narrow.state_dict()))
ids = torch.randint(0, 64, (2, 20))
check(torch.allclose(wide(ids), narrow(ids), atol=1e-5), "a model grown from 2 to 4 heads gives the same logits")
check(torch.equal(wide.blocks[1].attn_q.weight[:32], narrow.blocks[1].attn_q.weight)
      and wide.blocks[1].attn_q.weight[32:].abs().sum() > 0, "old heads keep their rows, fresh heads are random")
opt_ = torch.optim.AdamW(wide.parameters(), lr=1e-3)
torch.nn.functional.cross_entropy(wide(ids).flatten(0, 1), torch.randint(0, 64, (40,))).backward()
opt_.step()
check(wide.blocks[0].attn_output.weight[:, 32:].abs().sum() > 0, "the fresh heads' output columns train away from zero")
try:
    grow_heads(Llama(Config(**{**narrow_cfg.to_dict(), "n_heads": 4, "n_kv_heads": 1, "key_length": 16})),
               narrow.state_dict()); bad = False
except ValueError:
    bad = True
check(bad, "growing heads with another GQA group size is an error")

print("all checks passed" if not failures else f"{len(failures)} check(s) FAILED")
sys.exit(1 if failures else 0)
