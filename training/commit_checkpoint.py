#!/usr/bin/env python3
"""Export a run's weights to $CACHE/training/checkpoints/NAME.gguf and record the run in the
repository (training/checkpoints/NAME.json), so the run can go on from the GGUF when ckpt.pt is
gone. The GGUF stays out of git (13-19 MB each; checkpoints/README.md says where old ones are):

  python3 training/commit_checkpoint.py --run-dir $CACHE/training/run10 \\
      --curriculum training/curricula/curriculum_v18.json --name run10 [--resume-curriculum LATER.json]

The GGUF holds F16 matrices and F32 norms (export_gguf.py), not the AdamW moments; the JSON
says which curriculum and step it is and the command that resumes it (train.py --init-gguf
--init-step), which starts a fresh optimizer at that step's stage and learning rate.
"""
import argparse, json, os, subprocess, sys
import common  # first: it runs this script in the training environment (common.py)
import torch

HERE = os.path.dirname(os.path.abspath(__file__))

ap = argparse.ArgumentParser()
ap.add_argument("--run-dir", required=True)
ap.add_argument("--curriculum", required=True, help="the curriculum file the run trains with (path in the repository)")
ap.add_argument("--name", required=True)
ap.add_argument("--resume-curriculum", help="the curriculum the resume command trains on (default: --curriculum); "
                "it must extend the trained one, e.g. when the trained curriculum is finished")
args = ap.parse_args()

ck = torch.load(os.path.join(args.run_dir, "ckpt.pt"))
sys.path.insert(0, HERE)
from train import load_curriculum
if load_curriculum(args.curriculum)["stages"] != ck["curriculum"]["stages"]:
    raise SystemExit(f"{args.curriculum} is not the curriculum the checkpoint was trained with")
resume_cur = args.resume_curriculum or args.curriculum
if load_curriculum(resume_cur)["stages"][:len(ck["curriculum"]["stages"])] != ck["curriculum"]["stages"]:
    raise SystemExit(f"{resume_cur} does not begin with the stages the checkpoint was trained with")
gguf_dir = os.path.join(common.WORK_DIR, "checkpoints")
os.makedirs(gguf_dir, exist_ok=True)
out = os.path.join(gguf_dir, args.name + ".gguf")
subprocess.run([sys.executable, os.path.join(HERE, "export_gguf.py"), "--ckpt", os.path.join(args.run_dir, "ckpt.pt"),
                "-o", out, "--name", f"magicpig-{args.name}-step{ck['step']}"], check=True)
rel = lambda path: os.path.relpath(os.path.abspath(path), os.path.dirname(HERE))
cur = rel(args.curriculum)
meta = {"run": args.name, "curriculum": cur, "step": ck["step"], "tokens_this_run": ck["tokens"],
        "train_seconds_this_run": round(ck["elapsed"]),
        "resume": f"python3 training/train.py --curriculum {rel(resume_cur)} --run-dir $CACHE/training/{args.name} "
                  f"--threads 2 --init-gguf $CACHE/training/checkpoints/{args.name}.gguf --init-step {ck['step']}"}
# A resume into a curriculum that is already over would only print "curriculum finished".
if ck["step"] >= sum(s["steps"] for s in load_curriculum(resume_cur)["stages"]):
    meta["note"] = (f"{rel(resume_cur)} is finished at step {ck['step']}: to go on, write a curriculum that "
                    f"extends it and put it in the resume command (--resume-curriculum)")
open(os.path.join(HERE, "checkpoints", args.name + ".json"), "w").write(json.dumps(meta, indent=1) + "\n")
print(json.dumps(meta, indent=1))
