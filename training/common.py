"""Paths and constants shared by the training scripts (run them with Debian's /usr/bin/python3)."""
import os

CORPORA = ["austen", "kjv", "sotu", "mobydick", "jargon"]

CACHE = os.environ.get("MAGICPIG_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "magicpig"))
CORPUS_DIR = os.path.join(CACHE, "corpora")
SPLIT_DIR = os.path.join(CORPUS_DIR, "split")
WORK_DIR = os.path.join(CACHE, "training")           # tokenizer, token arrays, checkpoints, logs
TOKENIZER_PREFIX = os.path.join(WORK_DIR, "tokenizer")  # tokenizer.model / tokenizer.vocab


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
