"""Paths and constants shared by the training scripts.

The scripts run in the training environment that scripts/setup.sh --training makes under the
cache (PyTorch 2.x for the CPU, numpy and sentencepiece from PyPI, pinned in requirements.txt).
Importing this module from any other python re-runs the script with that environment's python,
or stops with what to run when the environment is missing, so every entry script imports it
before numpy / torch / sentencepiece. MAGICPIG_TRAINING_ANY_PYTHON=1 turns this off (a python
with its own torch, e.g. a CUDA build on a GPU machine).
"""
import os, sys

# Public-domain corpora of scripts/fetch_corpora.sh. The shipped tokenizer and models were also
# trained on "sotu" and "mobydick" (npm, no longer reachable): see README.md, "Corpora".
CORPORA = ["austen", "kjv", "jargon"]

CACHE = os.environ.get("MAGICPIG_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "magicpig"))
CORPUS_DIR = os.path.join(CACHE, "corpora")
SPLIT_DIR = os.path.join(CORPUS_DIR, "split")
WORK_DIR = os.path.join(CACHE, "training")           # tokenizer, token arrays, checkpoints, logs
TOKENIZER_PREFIX = os.path.join(WORK_DIR, "tokenizer")  # tokenizer.model / tokenizer.vocab
VENV = os.path.join(CACHE, "venv-training")
VENV_PYTHON = os.path.join(VENV, "bin", "python")


def _use_training_venv():
    if os.environ.get("MAGICPIG_TRAINING_ANY_PYTHON") == "1":
        return
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    if not os.path.exists(VENV_PYTHON):
        raise SystemExit(f"the training environment {VENV} is missing: run scripts/setup.sh --training")
    script = sys.argv[0] if sys.argv else ""
    if not os.path.isfile(script):  # python -c, an interactive session: nothing to re-run
        raise SystemExit(f"the training modules need the training environment: use {VENV_PYTHON}")
    os.execv(VENV_PYTHON, [VENV_PYTHON] + sys.argv)


_use_training_venv()


def split_path(name, part):
    """part is 'train' or 'heldout' (see scripts/fetch_corpora.sh for how the split is made)."""
    path = os.path.join(SPLIT_DIR, f"{name}.{part}.txt")
    if not os.path.exists(path):
        raise SystemExit(f"missing {path}: run scripts/fetch_corpora.sh first")
    return path


def tokens_path(name, part):
    return os.path.join(WORK_DIR, "tokens", f"{name}.{part}.npy")


def tokenizer_model():
    path = TOKENIZER_PREFIX + ".model"
    if not os.path.exists(path):
        raise SystemExit(f"missing {path}: run training/train_tokenizer.py first")
    return path
