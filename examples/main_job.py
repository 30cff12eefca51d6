"""The main job: train and run real models on the `neuron` device and check them against the CPU.

1. A small CNN trained on scikit-learn's handwritten digits: test accuracy within 1 point of the
   same script on the CPU, and the first steps' losses close to the CPU's.
2. The pretrained all-MiniLM-L6-v2 sentence-embedding model: cosine similarity >= 0.9999 with the
   CPU's embedding for every sentence, and the same nearest-neighbour ranking.

Exits with status 1 when a check fails.

    python examples/main_job.py
"""

from __future__ import annotations

import sys
import time

import torch

import torch_neuronx
from examples import digits_cnn, minilm_embeddings

FIRST_STEPS = 10


def run_digits() -> bool:
    cpu = digits_cnn.train("cpu")
    neuron = digits_cnn.train("neuron")
    gap = abs(neuron.test_accuracy - cpu.test_accuracy)
    loss_error = max(abs(a - b) for a, b in zip(neuron.losses[:FIRST_STEPS], cpu.losses[:FIRST_STEPS], strict=True))
    print("digits CNN (sklearn load_digits, 1437 train / 360 test images, 10 epochs, AdamW)")
    print(f"  cpu    test accuracy {cpu.test_accuracy:.4f}   {cpu.seconds:6.1f} s")
    print(f"  neuron test accuracy {neuron.test_accuracy:.4f}   {neuron.seconds:6.1f} s")
    print(
        f"  first {FIRST_STEPS} losses: cpu {cpu.losses[0]:.5f} .. {cpu.losses[FIRST_STEPS - 1]:.5f}, "
        f"max |neuron - cpu| = {loss_error:.2e}"
    )
    passed = gap <= 0.01 and loss_error <= 1e-3
    print(f"  accuracy gap {100 * gap:.2f} points (<= 1), loss gap <= 1e-3: {'PASS' if passed else 'FAIL'}")
    return passed


def run_minilm() -> bool:
    sentences = minilm_embeddings.SENTENCES
    cpu = minilm_embeddings.embed(sentences, "cpu")
    start = time.perf_counter()
    neuron = minilm_embeddings.embed(sentences, "neuron")
    seconds = time.perf_counter() - start
    cosine = torch.nn.functional.cosine_similarity(cpu, neuron, dim=1)
    same_ranking = minilm_embeddings.nearest_neighbours(cpu) == minilm_embeddings.nearest_neighbours(neuron)
    print(f"all-MiniLM-L6-v2 sentence embeddings ({len(sentences)} sentences, 384 dims, {seconds:.1f} s on neuron)")
    print(f"  cosine(cpu, neuron): min {cosine.min().item():.7f}, mean {cosine.mean().item():.7f}")
    print(f"  nearest-neighbour ranking identical: {same_ranking}")
    passed = bool(cosine.min() >= 0.9999) and same_ranking
    print(f"  min cosine >= 0.9999 and same ranking: {'PASS' if passed else 'FAIL'}")
    return passed


def main() -> int:
    torch_neuronx.clear_op_tracking()
    results = [run_digits(), run_minilm()]
    fallback = torch_neuronx.get_fallback_ops()
    print(
        f"ops run on neuron: {len(torch_neuronx.get_executed_ops())}, ops that fell back to the CPU: "
        f"{sorted(fallback) if fallback else 'none'}"
    )
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
