"""Deterministic, resumable batch streams for the job zoo.

Every batch is a pure function of ``(seed, position)``: batch ``p`` is drawn with
``numpy.random.default_rng([seed, p])``. The stream's whole state is therefore the pair
``{"seed", "position"}``, so a checkpoint can restore the data iterator exactly, and an execution
plan that splits the global batch across data-parallel ranks or gradient-accumulation micro-batches
sees exactly the same samples as a single process.

Data sources (no downloads):

* ``digits``: scikit-learn's bundled 8×8 handwritten digits (1797 images, 10 classes), scaled to
  [0, 1]; a batch is ``B`` distinct images drawn uniformly.
* ``markov tokens``: a synthetic first-order Markov "grammar" over ``V`` tokens in which every token
  has three successors with probabilities (0.6, 0.3, 0.1). A batch is ``B`` sequences of ``L + 1``
  tokens; the model predicts token ``t + 1`` from tokens ``≤ t``. The entropy rate is
  ``H = -Σ p log p ≈ 0.90`` nats, far below the uniform ``log V``, so the loss visibly falls.
* ``implicit feedback``: a user × item 0/1 matrix ``R = [U Vᵀ + ε > τ]`` from low-rank factors
  (rank 6), about 15 % dense. A batch is ``B`` user rows; the input keeps each entry with
  probability 0.8 (a denoising autoencoder's corruption), the target is the full row.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Iterator

import numpy as np
import torch

from policyopt.errors import InputError

__all__ = [
    "Batch",
    "BatchStream",
    "digits_batch_fn",
    "markov_tokens_batch_fn",
    "implicit_feedback_batch_fn",
    "markov_entropy_rate",
    "split_batch",
]

Batch = tuple[torch.Tensor, ...]
BatchFn = Callable[[np.random.Generator], Batch]


class BatchStream(Iterator[Batch]):
    """An endless iterator of batches where batch ``p`` depends only on ``(seed, p)``.

    Implements the resumable-iterator protocol used by :class:`policyopt.jobs.TrainingSession`:
    ``state_dict() -> {"seed": int, "position": int}`` and ``load_state_dict(state)``.
    """

    def __init__(self, batch_fn: BatchFn, seed: int, position: int = 0) -> None:
        if position < 0:
            raise InputError("position", position, "must be >= 0")
        self._batch_fn = batch_fn
        self.seed = int(seed)
        self.position = int(position)

    def batch_at(self, position: int) -> Batch:
        """The batch at ``position`` (does not move the stream)."""
        return self._batch_fn(np.random.default_rng([self.seed, int(position)]))

    def __iter__(self) -> "BatchStream":
        return self

    def __next__(self) -> Batch:
        batch = self.batch_at(self.position)
        self.position += 1
        return batch

    def state_dict(self) -> dict[str, int]:
        return {"seed": self.seed, "position": self.position}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if int(state["seed"]) != self.seed:
            raise InputError("data.seed", state["seed"],
                             f"checkpoint was taken with seed {state['seed']}, stream has {self.seed}")
        if int(state["position"]) < 0:
            raise InputError("data.position", state["position"], "must be >= 0")
        self.position = int(state["position"])


def split_batch(batch: Batch, index: int, count: int) -> Batch:
    """Contiguous shard ``index`` of ``count`` equal shards along dimension 0.

    Raises :class:`InputError` when the batch size is not divisible by ``count`` (plans keep the
    global batch constant, so shards must be equal for the gradient average to equal the
    full-batch gradient: ``∇ mean(L) = (1/count) Σ_k ∇ mean(L_k)`` only for equal shards).
    """
    size = int(batch[0].shape[0])
    if count < 1 or size % count != 0:
        raise InputError("plan", count, f"global batch {size} is not divisible into {count} equal shards")
    step = size // count
    return tuple(t[index * step:(index + 1) * step] for t in batch)


# --------------------------------------------------------------------------------------------
# digits


@lru_cache(maxsize=1)
def _digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits  # bundled with scikit-learn, no download

    data = load_digits()
    images = (data.images.astype(np.float32) / 16.0)[:, None, :, :]
    return images, data.target.astype(np.int64)


def digits_batch_fn(batch_size: int) -> BatchFn:
    """Batches ``(images[B,1,8,8] float32, labels[B] int64)`` of distinct digit images."""

    def make(rng: np.random.Generator) -> Batch:
        images, labels = _digits()
        rows = rng.choice(images.shape[0], size=batch_size, replace=False)
        return torch.from_numpy(images[rows]), torch.from_numpy(labels[rows])

    return make


# --------------------------------------------------------------------------------------------
# Markov token streams

_MARKOV_PROBS = np.array([0.6, 0.3, 0.1])


@lru_cache(maxsize=8)
def _markov_successors(vocab: int, grammar_seed: int = 1234) -> np.ndarray:
    """``succ[v]`` = the three distinct successors of token ``v`` (fixed per vocabulary)."""
    rng = np.random.default_rng(grammar_seed)
    keys = rng.random((vocab, vocab))
    return np.argsort(keys, axis=1)[:, :3]


def markov_entropy_rate(vocab: int) -> float:
    """Entropy rate of the synthetic grammar in nats: ``-Σ_k p_k log p_k`` (same for every state)."""
    del vocab
    return float(-(_MARKOV_PROBS * np.log(_MARKOV_PROBS)).sum())


def markov_tokens_batch_fn(batch_size: int, seq_len: int, vocab: int) -> BatchFn:
    """Batches ``(inputs[B,L] int64, targets[B,L] int64)``, targets = inputs shifted by one."""
    cumulative = np.cumsum(_MARKOV_PROBS)

    def make(rng: np.random.Generator) -> Batch:
        succ = _markov_successors(vocab)
        tokens = np.empty((batch_size, seq_len + 1), dtype=np.int64)
        tokens[:, 0] = rng.integers(0, vocab, size=batch_size)
        choice = np.searchsorted(cumulative, rng.random((batch_size, seq_len)), side="right")
        for t in range(seq_len):  # sequential in time, vectorized over the batch
            tokens[:, t + 1] = succ[tokens[:, t], choice[:, t]]
        data = torch.from_numpy(tokens)
        return data[:, :-1].contiguous(), data[:, 1:].contiguous()

    return make


# --------------------------------------------------------------------------------------------
# implicit feedback (recommendation)


@dataclass(frozen=True)
class _Feedback:
    matrix: np.ndarray  # float32 [users, items] of 0/1


@lru_cache(maxsize=4)
def _feedback(users: int, items: int, rank: int = 6, seed: int = 4321) -> _Feedback:
    rng = np.random.default_rng(seed)
    u = rng.normal(size=(users, rank))
    v = rng.normal(size=(items, rank))
    scores = u @ v.T / np.sqrt(rank) + 0.3 * rng.normal(size=(users, items))
    threshold = np.quantile(scores, 0.85)
    return _Feedback(matrix=(scores > threshold).astype(np.float32))


def implicit_feedback_batch_fn(batch_size: int, users: int, items: int, keep: float = 0.8) -> BatchFn:
    """Batches ``(corrupted rows[B,I] float32, full rows[B,I] float32)``."""

    def make(rng: np.random.Generator) -> Batch:
        matrix = _feedback(users, items).matrix
        rows = matrix[rng.integers(0, users, size=batch_size)]
        mask = (rng.random(rows.shape) < keep).astype(np.float32)
        return torch.from_numpy(rows * mask), torch.from_numpy(rows.copy())

    return make
