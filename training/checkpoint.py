"""The one loader the evaluation tools share: a model from a train.py checkpoint (.pt) or from a
GGUF written by export_gguf.py, so evaluate.py, diagnose.py, check_export.py and probe_binding.py
accept either (e.g. models/default.gguf, or a committed training/checkpoints/*.gguf)."""
import torch
import gguf_import
from model import Config, Llama


def load(path, f16_matrices=False):
    """(model in eval mode, info). info has step / tokens / elapsed for a .pt, None for a GGUF
    (the file does not record them). f16_matrices rounds every matrix to float16, the precision
    an exported GGUF stores, so a .pt compares with its export token for token."""
    if path.endswith(".gguf"):
        state, meta = gguf_import.read_state(path)
        config = gguf_import.config_dict(meta, state)
        info = {"step": None, "tokens": None, "elapsed": None}
    else:
        ck = torch.load(path, map_location="cpu")
        state, config = ck["model"], ck["config"]
        info = {k: ck[k] for k in ("step", "tokens", "elapsed")}
    if f16_matrices:
        state = {k: (v.half().float() if v.dim() >= 2 else v) for k, v in state.items()}
    model = Llama(Config(**config))
    model.load_state_dict(state)
    model.eval()
    return model, info
