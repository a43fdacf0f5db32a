"""The job zoo: named job types (model family × batch size) built from plain torch.

``JOB_TYPES[name]`` is a :class:`JobTypeSpec`; ``spec.build(seed, device)`` returns a
:class:`JobInstance` holding the model, its optimizer, the resumable data stream and the loss.
Everything is seeded: the same ``(name, seed)`` gives the same initial parameters and the same
batch sequence on every run.

Families (one CPU thread, a step takes roughly 5–50 ms):

============== ============================================ ================================
family         model                                        data
============== ============================================ ================================
resnet         residual CNN, GroupNorm, 2 stages × 2 blocks  scikit-learn digits (8×8)
lstm           2-layer LSTM language model                  synthetic Markov grammar, V=64
transformer    2-layer GPT-style decoder (d=64, 4 heads)    synthetic Markov grammar, V=64
recommendation denoising autoencoder 256→256→64→256→256      synthetic implicit feedback
============== ============================================ ================================
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from policyopt.errors import InputError, UnknownNameError

from .data import (
    Batch,
    BatchStream,
    digits_batch_fn,
    implicit_feedback_batch_fn,
    markov_tokens_batch_fn,
)
from .models import LSTMLanguageModel, RecAutoencoder, SmallResNet, TinyGPT, count_parameters

__all__ = ["JobTypeSpec", "JobInstance", "JOB_TYPES", "FAMILIES", "get_job_type", "build_job"]

LossFn = Callable[[nn.Module, Batch], torch.Tensor]

VOCAB = 64
SEQ_LEN = 32
USERS = 4096
ITEMS = 256


@dataclass
class JobInstance:
    """A built job: ``loss_fn(model, batch)`` is the mean loss of a (micro-)batch."""

    spec: "JobTypeSpec"
    model: nn.Module
    optimizer: torch.optim.Optimizer
    stream: BatchStream
    loss_fn: LossFn
    device: torch.device

    def to_device(self, batch: Batch) -> Batch:
        return tuple(t.to(self.device, non_blocking=True) for t in batch)


@dataclass(frozen=True)
class JobTypeSpec:
    """A job type: family, batch size and the shape numbers the performance model uses.

    ``seq_len`` is positions per sample (tokens; 64 pixels for images; 1 for a user row),
    ``hidden`` the main width, ``layers`` the number of repeated blocks.
    """

    name: str
    family: str
    batch_size: int
    default_steps: int
    lr: float
    layers: int
    hidden: int
    seq_len: int
    description: str
    make_model: Callable[[], nn.Module] = field(repr=False, compare=False)
    make_batch_fn: Callable[[int], Callable] = field(repr=False, compare=False)
    loss_fn: LossFn = field(repr=False, compare=False)

    def build(self, seed: int = 0, device: str | torch.device = "cpu") -> JobInstance:
        """Model (initialized from ``torch.manual_seed(seed)`` without touching the global RNG),
        Adam optimizer and the data stream seeded with ``seed``."""
        if seed < 0:
            raise InputError("seed", seed, "must be >= 0")
        dev = torch.device(device)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = self.make_model()
        model.to(dev)
        optimizer = torch.optim.Adam(model.parameters(), lr=self.lr)
        stream = BatchStream(self.make_batch_fn(self.batch_size), seed=seed)
        stream.batch_at(0)  # load/generate the cached data set now, not inside the first timed step
        return JobInstance(self, model, optimizer, stream, self.loss_fn, dev)

    def parameter_count(self) -> int:
        with torch.random.fork_rng(devices=[]):
            return count_parameters(self.make_model())


def _classification_loss(model: nn.Module, batch: Batch) -> torch.Tensor:
    x, y = batch
    return F.cross_entropy(model(x), y)


def _lm_loss(model: nn.Module, batch: Batch) -> torch.Tensor:
    x, y = batch
    logits = model(x)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def _reconstruction_loss(model: nn.Module, batch: Batch) -> torch.Tensor:
    x, target = batch
    return F.binary_cross_entropy_with_logits(model(x), target)


def _family_specs() -> dict[str, JobTypeSpec]:
    specs: list[JobTypeSpec] = []
    for bs in (32, 64, 128):
        specs.append(JobTypeSpec(
            f"resnet-bs{bs}", "resnet", bs, 300, 2e-3, layers=4, hidden=32, seq_len=64,
            description="ResNet-style CNN (GroupNorm, 4 residual blocks) on scikit-learn digits 8x8",
            make_model=SmallResNet, make_batch_fn=digits_batch_fn, loss_fn=_classification_loss))
    for bs in (10, 20, 40):
        specs.append(JobTypeSpec(
            f"lstm-bs{bs}", "lstm", bs, 300, 3e-3, layers=2, hidden=128, seq_len=SEQ_LEN,
            description="2-layer LSTM language model on a synthetic Markov grammar (V=64, L=32)",
            make_model=lambda: LSTMLanguageModel(VOCAB),
            make_batch_fn=lambda b: markov_tokens_batch_fn(b, SEQ_LEN, VOCAB), loss_fn=_lm_loss))
    for bs in (16, 32, 64):
        specs.append(JobTypeSpec(
            f"transformer-bs{bs}", "transformer", bs, 300, 3e-3, layers=2, hidden=64, seq_len=SEQ_LEN,
            description="2-layer GPT-style decoder (d=64, 4 heads) on a synthetic Markov grammar",
            make_model=lambda: TinyGPT(VOCAB, SEQ_LEN),
            make_batch_fn=lambda b: markov_tokens_batch_fn(b, SEQ_LEN, VOCAB), loss_fn=_lm_loss))
    for bs in (128, 256, 512):
        specs.append(JobTypeSpec(
            f"recommendation-bs{bs}", "recommendation", bs, 300, 2e-3, layers=4, hidden=256, seq_len=1,
            description="denoising autoencoder on synthetic implicit feedback (4096 users x 256 items)",
            make_model=lambda: RecAutoencoder(ITEMS),
            make_batch_fn=lambda b: implicit_feedback_batch_fn(b, USERS, ITEMS), loss_fn=_reconstruction_loss))
    return {s.name: s for s in specs}


JOB_TYPES: dict[str, JobTypeSpec] = _family_specs()
FAMILIES: tuple[str, ...] = ("resnet", "lstm", "transformer", "recommendation")


def get_job_type(name: str) -> JobTypeSpec:
    """The spec registered as ``name``; raises :class:`UnknownNameError` listing the known names."""
    try:
        return JOB_TYPES[name]
    except (KeyError, TypeError):
        raise UnknownNameError("job_type", name, JOB_TYPES) from None


def build_job(name: str, seed: int = 0, device: str | torch.device = "cpu") -> JobInstance:
    """Shorthand for ``get_job_type(name).build(seed, device)``."""
    return get_job_type(name).build(seed, device)
