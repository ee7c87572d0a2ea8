#!/usr/bin/env python3
"""Train the small Llama on text + synthetic retrieval episodes, following a curriculum file.

  python3 training/train.py --curriculum training/curricula/curriculum_short.json \
      --run-dir $CACHE/training/run1 [--threads 2] [--max-minutes 30]

SIGTERM / Ctrl-C: finishes the current step, writes the checkpoint, exits.
Resumes automatically from RUN_DIR/ckpt.pt (model, optimizer, step, tokens, elapsed time);
the data of step s is a pure function of (seed, s), so a resumed run continues exactly as an
uninterrupted one would (bit-exact at the same thread count). A curriculum may be extended
(more stages appended) and the run resumed with the longer file.
Loss per token: answer_weight on answer tokens, text_weight on every other token, normalised
by the sum of weights. Log: RUN_DIR/log.csv (loss vs tokens), RUN_DIR/eval.csv (held-out
needle accuracy during training).
"""
import argparse, csv, fcntl, json, math, os, signal, sys, time
import common  # first: it runs this script in the training environment (common.py)
import numpy as np
import torch
import torch.nn.functional as F
import sentencepiece as spm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data
from model import Config, Llama, grow_depth, grow_heads


def stage_at(stages, step):
    """(index, stage, first step of the stage) for a global step; None past the end."""
    start = 0
    for i, s in enumerate(stages):
        if step < start + s["steps"]:
            return i, s, start
        start += s["steps"]
    return None


def lr_at(stage, k):
    """Linear warmup to stage lr, then cosine down to lr*min_lr_frac at the end of the stage."""
    lr, warm, n = stage["lr"], stage.get("warmup", 0), stage["steps"]
    if k < warm:
        return lr * (k + 1) / warm
    t = (k - warm) / max(1, n - warm)
    lo = lr * stage.get("min_lr_frac", 0.1)
    return lo + 0.5 * (lr - lo) * (1 + math.cos(math.pi * t))


def weighted_loss(logits, targets, mask, answer_weight, text_weight):
    nll = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none").view(targets.shape)
    w = mask * answer_weight + (1 - mask) * text_weight
    loss = (nll * w).sum() / w.sum().clamp_min(1e-6)
    with torch.no_grad():
        ans = mask > 0
        a_loss = nll[ans].mean().item() if ans.any() else float("nan")
        t_loss = nll[~ans].mean().item()
        a_acc = (logits.argmax(-1)[ans] == targets[ans]).float().mean().item() if ans.any() else float("nan")
    return loss, a_loss, t_loss, a_acc


@torch.no_grad()
def needle_accuracy(model, maker, seed, seq_len, n, depths=None, n_distractors=0, batch=8):
    """Exact-answer rate of single-needle episodes with HELD-OUT keys and held-out text.
    Teacher-forced: correct iff the argmax at every answer token (the '▁' and 7 digits) is the
    target, which is exactly when greedy decoding would produce the answer."""
    model.eval()
    rng = np.random.default_rng([seed, 999_999, seq_len])
    ok = 0
    for i in range(0, n, batch):
        xs, ms = [], []
        for j in range(i, min(n, i + batch)):
            d = None if depths is None else depths[j % len(depths)]
            ids, m, _ = maker.single(rng, seq_len, 0.0, n_distractors=n_distractors, depth=d, strict=True)
            xs.append(ids); ms.append(m)
        x = torch.tensor(xs); m = torch.tensor(ms)[:, 1:]
        m[:, -1] = 0  # the final EOS is not part of the 7-digit answer
        pred = model(x[:, :-1]).argmax(-1)
        good = ((pred == x[:, 1:]) | (m == 0)).all(dim=1)
        ok += int(good.sum())
    model.train()
    return ok / n


def load_curriculum(path):
    """A curriculum may say {"extends": "other.json", "stages": [...]}: the other file's settings
    and stages come first, these stages are appended (so a longer run keeps the short run's
    stages byte for byte and can resume its checkpoint)."""
    cur = json.load(open(path))
    if "extends" in cur:
        base = load_curriculum(os.path.join(os.path.dirname(os.path.abspath(path)), cur["extends"]))
        stages = base["stages"] + cur["stages"]
        cur = {**base, **{k: v for k, v in cur.items() if k not in ("extends", "stages")}, "stages": stages}
    return cur


def save(path, obj):
    tmp = path + ".tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--curriculum", required=True)
    ap.add_argument("--run-dir", default=os.path.join(common.WORK_DIR, "run1"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-minutes", type=float, default=0, help="stop (after a checkpoint) after this long; 0 = run to the end")
    ap.add_argument("--ckpt-minutes", type=float, default=5)
    ap.add_argument("--log-every", type=int, default=5)
    ap.add_argument("--eval-every", type=int, default=50, help="held-out needle evaluation every N steps and at "
                    "each stage end; 0 = none (at 4,096 tokens one evaluation costs minutes)")
    ap.add_argument("--eval-n", type=int, default=48)
    ap.add_argument("--stop-at-step", type=int, default=0, help="stop (after a checkpoint) at this step (for tests of resume)")
    ap.add_argument("--allow-curriculum-change", action="store_true")
    ap.add_argument("--init-gguf", default=None, help="a new run starts from these weights (a GGUF written by "
                    "export_gguf.py with the curriculum's model shape) with a fresh optimizer")
    ap.add_argument("--init-step", type=int, default=0, help="with --init-gguf: start at this step of the curriculum "
                    "(its stage and learning-rate schedule), to go on from a committed weights-only checkpoint "
                    "(training/checkpoints/) when the run's ckpt.pt is gone")
    ap.add_argument("--grow-new-layers", default=None, help="with --init-gguf: the GGUF has fewer blocks than the "
                    "curriculum's model; comma-separated indices (in the grown model) of the fresh blocks, which "
                    "start as the identity (model.grow_depth), the GGUF's blocks fill the other indices in order")
    ap.add_argument("--grow-heads", action="store_true", help="with --init-gguf: the GGUF has fewer attention heads "
                    "(of the curriculum model's head_dim, same GQA group) than the curriculum's model; the fresh "
                    "heads come after the trained ones and start silent (model.grow_heads)")
    args = ap.parse_args()
    if args.grow_heads and not args.init_gguf:
        raise SystemExit("--grow-heads goes with --init-gguf")
    if args.grow_new_layers and not args.init_gguf:
        raise SystemExit("--grow-new-layers goes with --init-gguf")
    if args.init_step and not args.init_gguf:
        raise SystemExit("--init-step goes with --init-gguf")

    torch.set_num_threads(args.threads)
    cur = load_curriculum(args.curriculum)
    os.makedirs(args.run_dir, exist_ok=True)
    # one train.py per run dir: a second one would trim log.csv to its own resume step and race
    # the first on ckpt.pt (the twenty-second session did this by accident); the lock is the
    # kernel's, so it goes away with the process however it ends
    lock = open(os.path.join(args.run_dir, "lock"), "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SystemExit(f"another train.py is using {args.run_dir} (it holds {args.run_dir}/lock)")
    ckpt_path = os.path.join(args.run_dir, "ckpt.pt")

    sp = spm.SentencePieceProcessor(model_file=common.tokenizer_model())
    cfg = Config(**{**cur["model"], "vocab_size": sp.vocab_size()})
    seed = cur.get("seed", 1234)
    torch.manual_seed(seed)
    model = Llama(cfg)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cur.get("weight_decay", 0.1)},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    step, tokens, elapsed = 0, 0, 0.0
    # (first step, steps): a fresh optimizer put in mid-curriculum (--init-step) ramps its rate up
    # again, since AdamW's first updates with empty moments are the largest
    rewarm = None
    if os.path.exists(ckpt_path):
        ck = torch.load(ckpt_path)
        if {**Config().to_dict(), **ck["config"]} != cfg.to_dict():  # fields added since default
            raise SystemExit(f"checkpoint config {ck['config']} differs from curriculum model {cfg.to_dict()}")
        model.load_state_dict(ck["model"]); opt.load_state_dict(ck["optim"])
        step, tokens, elapsed = ck["step"], ck["tokens"], ck["elapsed"]
        rewarm = ck.get("rewarm")
        # the stages already (partly) trained must be the ones this checkpoint was trained with;
        # only appending stages (or lengthening the last, unfinished, one) keeps resume exact
        done, start = [], 0
        for s in ck["curriculum"]["stages"]:
            if start >= step:
                break
            done.append(s); start += s["steps"]
        now = cur["stages"][:len(done)]
        same = all(a == b for a, b in zip(done[:-1], now[:-1])) and len(now) == len(done) and \
            (not done or {k: v for k, v in done[-1].items() if k != "steps"} == {k: v for k, v in now[-1].items() if k != "steps"})
        if not same and not args.allow_curriculum_change:
            raise SystemExit("the curriculum's stages up to the checkpoint's step differ from the ones it was "
                             "trained with (see RUN_DIR/curriculum.json); pass --allow-curriculum-change to go on anyway")
        print(f"resumed from {ckpt_path}: step {step}, {tokens} tokens, {elapsed/60:.1f} min", flush=True)
    elif args.init_gguf:
        import gguf_import
        state, meta = gguf_import.read_state(args.init_gguf)
        if args.grow_new_layers:
            try:
                state = grow_depth(model, state, [int(i) for i in args.grow_new_layers.split(",")])
            except ValueError as e:
                raise SystemExit(f"--grow-new-layers: {e}")
        if args.grow_heads:
            try:
                state = grow_heads(model, state)
            except ValueError as e:
                raise SystemExit(f"--grow-heads: {e}")
        missing, unexpected = model.load_state_dict(state, strict=False)
        if missing or unexpected:
            raise SystemExit(f"{args.init_gguf} does not match the curriculum model: missing {missing}, unexpected {unexpected}")
        if args.init_step < 0 or stage_at(cur["stages"], args.init_step) is None:
            raise SystemExit(f"--init-step {args.init_step} is outside the curriculum's {sum(s['steps'] for s in cur['stages'])} steps")
        step, tokens = args.init_step, 0  # tokens counts this run only; the curriculum's "init" says what came before
        rewarm = (step, 20) if step else None
        print(f"new run from {args.init_gguf} at step {step}: {model.num_params()} parameters", flush=True)
    else:
        print(f"new run: {model.num_params()} parameters, config {cfg.to_dict()}", flush=True)

    json.dump(cur, open(os.path.join(args.run_dir, "curriculum.json"), "w"), indent=1)
    train_maker = data.EpisodeMaker(sp, "train")
    held_maker = data.EpisodeMaker(sp, "heldout")
    log_path = os.path.join(args.run_dir, "log.csv")
    eval_path = os.path.join(args.run_dir, "eval.csv")
    mk_path = os.path.join(args.run_dir, "eval_multikey.csv")  # stages with "eval_distractors": N
    for path in (log_path, eval_path, mk_path):  # rows logged after the checkpoint will be logged again
        if os.path.exists(path):
            rows = open(path).read().splitlines()
            keep = rows[:1] + [r for r in rows[1:] if int(r.split(",")[0]) <= step]
            open(path, "w").write("".join(r + "\n" for r in keep))
    new_log = not os.path.exists(log_path)
    logf = open(log_path, "a", newline="")
    log = csv.writer(logf)
    if new_log:
        log.writerow(["step", "tokens", "stage", "seq_len", "batch", "lr", "loss", "answer_loss", "text_loss",
                      "answer_token_acc", "elapsed_s", "tokens_per_s", "threads"])
    if not os.path.exists(eval_path):
        open(eval_path, "w").write("step,tokens,seq_len,heldout_needle_acc,n\n")
    if not os.path.exists(mk_path):
        open(mk_path, "w").write("step,tokens,seq_len,distractors,heldout_multikey_acc,n\n")

    def checkpoint():
        save(ckpt_path, {"model": model.state_dict(), "optim": opt.state_dict(), "step": step, "tokens": tokens,
                         "elapsed": elapsed, "config": cfg.to_dict(), "curriculum": cur, "rewarm": rewarm})

    interrupted = []  # SIGTERM/SIGINT: finish the step, checkpoint, exit
    signal.signal(signal.SIGTERM, lambda *_: interrupted.append(1))
    signal.signal(signal.SIGINT, lambda *_: interrupted.append(1))
    t_session = time.time(); t_ckpt = time.time()
    acc = []  # per-step stats since the last log line
    model.grad_checkpoint = False
    while True:
        at = stage_at(cur["stages"], step)
        if at is None:
            print("curriculum finished", flush=True)
            break
        si, st, s0 = at
        model.grad_checkpoint = st.get("grad_checkpoint", False)
        lr = lr_at(st, step - s0)
        if rewarm and step < rewarm[0] + rewarm[1]:
            lr *= (step - rewarm[0] + 1) / rewarm[1]
        for g in opt.param_groups:
            g["lr"] = lr
        t0 = time.time()
        L, B = st["seq_len"], st["batch"]
        if st.get("seq_len_min"):  # a length per step (a function of seed and step: resume stays exact),
            # the same tokens per step; one fixed length teaches the answer's position, not the search
            L = int(np.random.default_rng([seed, step, 7]).integers(st["seq_len_min"], st["seq_len"] + 1))
            B = max(1, st["batch"] * st["seq_len"] // L)
        x, m = train_maker.batch(seed, step, B, L, st["mix"], 0.0)
        x = torch.from_numpy(x); m = torch.from_numpy(m)[:, 1:]
        logits = model(x[:, :-1])
        loss, a_loss, t_loss, a_acc = weighted_loss(logits, x[:, 1:], m, st.get("answer_weight", 1.0), st.get("text_weight", 0.0))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cur.get("grad_clip", 1.0))
        opt.step()
        dt = time.time() - t0
        step += 1; tokens += x.shape[0] * (x.shape[1] - 1); elapsed += dt
        acc.append((loss.item(), a_loss, t_loss, a_acc, dt, x.shape[0] * (x.shape[1] - 1)))
        if step % args.log_every == 0:
            a = np.array(acc, dtype=np.float64)
            row = [step, tokens, st.get("name", si), st["seq_len"], st["batch"], f"{lr:.3e}",
                   f"{a[:,0].mean():.4f}", f"{np.nanmean(a[:,1]):.4f}", f"{a[:,2].mean():.4f}", f"{np.nanmean(a[:,3]):.3f}",
                   f"{elapsed:.1f}", f"{a[:,5].sum()/a[:,4].sum():.0f}", args.threads]
            log.writerow(row); logf.flush(); acc = []
            print(" ".join(str(v) for v in row), flush=True)
        next_stage = stage_at(cur["stages"], step)
        stage_end = next_stage is None or next_stage[0] != si
        if args.eval_every and (step % args.eval_every == 0 or stage_end):
            def held_out(nd):  # accuracy, seconds; nan when the episode does not fit this short sequence
                te = time.time()
                try:
                    return needle_accuracy(model, held_maker, seed, st["seq_len"], args.eval_n, n_distractors=nd), time.time() - te
                except ValueError:
                    return float("nan"), time.time() - te
            a, dt = held_out(0)
            open(eval_path, "a").write(f"{step},{tokens},{st['seq_len']},{a:.4f},{args.eval_n}\n")
            print(f"eval step {step}: held-out single-needle accuracy at {st['seq_len']}: {a:.3f} ({dt:.0f}s)", flush=True)
            nd = st.get("eval_distractors", 0)
            if nd:  # the asked needle among nd others: needs the key, not just "a needle"
                a, dt = held_out(nd)
                open(mk_path, "a").write(f"{step},{tokens},{st['seq_len']},{nd},{a:.4f},{args.eval_n}\n")
                print(f"eval step {step}: held-out multi-key accuracy ({nd} distractors) at {st['seq_len']}: {a:.3f} "
                      f"({dt:.0f}s)", flush=True)
        stop = (args.max_minutes and time.time() - t_session > args.max_minutes * 60) or \
               (args.stop_at_step and step >= args.stop_at_step) or bool(interrupted)
        if stop or stage_end or time.time() - t_ckpt > args.ckpt_minutes * 60:
            checkpoint(); t_ckpt = time.time()
        if stage_end:  # keep every stage's final state: a later stage may have to be redone from it
            import shutil
            shutil.copyfile(ckpt_path, os.path.join(args.run_dir, f"ckpt_step{step}_{st.get('name', si)}.pt"))
        if stop:
            print(f"stopping at step {step} (checkpoint saved)", flush=True)
            return
    checkpoint()


if __name__ == "__main__":
    main()
