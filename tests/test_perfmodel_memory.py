"""Memory estimator: formulas, plan effects, OOM exclusion, and real torch tensor sizes."""
from __future__ import annotations

import dataclasses

import pytest

from policyopt.errors import InputError
from policyopt.perfmodel import ModelSpec, Plan, best_plan, estimate_memory
from policyopt.perfmodel.memory import ACT_ELEMENTS_PER_TOKEN_HIDDEN
from policyopt.perfmodel.synthetic import NOMINAL_PARAMS, REFERENCE_CLUSTER, SHAPES

SPEC = ModelSpec(name="m", params=1e9, layers=8, hidden=1024, seq_len=512, global_batch=64,
                 fwd_time_1gpu=1.0, bytes_per_param=2.0)


def test_plain_dp_terms() -> None:
    m = estimate_memory(SPEC, Plan(dp=4))
    assert m.weights == 2e9 and m.grads == 2e9 and m.optimizer == 12e9  # fp32 master + m + v
    # 16 samples per GPU, 8 layers, A·β·s·h bytes per sample-layer
    assert m.activations == pytest.approx(16 * 8 * ACT_ELEMENTS_PER_TOKEN_HIDDEN * 2 * 512 * 1024)
    assert m.gpu_bytes == pytest.approx(m.weights + m.grads + m.optimizer + m.activations)
    assert m.host_bytes == 0


def test_zero_shards_and_offload_moves_to_host() -> None:
    none, z2 = estimate_memory(SPEC, Plan(dp=4)), estimate_memory(SPEC, Plan(dp=4, zero="dp"))
    off = estimate_memory(SPEC, Plan(dp=4, zero="offload"))
    assert z2.weights == none.weights
    assert z2.grads == none.grads / 4 and z2.optimizer == none.optimizer / 4
    assert off.optimizer == 0 and off.grads == none.grads / 4
    assert off.host_bytes == pytest.approx(1e9 * (12 + 2))


def test_tp_pp_gc_ga_effects() -> None:
    base = estimate_memory(SPEC, Plan(dp=1))
    tp = estimate_memory(SPEC, Plan(dp=1, tp=4))
    assert tp.weights == base.weights / 4 and tp.activations == pytest.approx(base.activations / 4)
    gc = estimate_memory(SPEC, Plan(dp=1, gc=True))
    # GC keeps 1 of A elements per layer plus one full layer for the recompute
    assert gc.activations == pytest.approx(
        base.activations / ACT_ELEMENTS_PER_TOKEN_HIDDEN + base.activations / SPEC.layers)
    ga = estimate_memory(SPEC, Plan(dp=1, ga_steps=4))
    assert ga.activations == pytest.approx(base.activations / 4)
    # pp=4, m=8: micro-batch 64/8 = 8 samples, 2 layers per stage, min(m, p) = 4 in flight
    pp = estimate_memory(SPEC, Plan(dp=1, pp=4, micro_batches=8))
    assert pp.weights == base.weights / 4
    assert pp.activations == pytest.approx(base.activations * (4 * 8 * 2) / (64 * 8))
    with pytest.raises(InputError, match="plan.ga_steps"):
        estimate_memory(SPEC, Plan(dp=8, ga_steps=16))


def test_attention_scores_by_head_count() -> None:
    """Stored attention scores add (2β+1)·a·s²/t bytes per sample and layer (5·a·s² at β = 2)."""
    heads = dataclasses.replace(SPEC, heads=16)
    scores = 5 * 16 * 512 ** 2  # bytes per sample and layer
    for plan, per_gpu in ((Plan(dp=4), 16 * 8 * scores),           # 16 samples, 8 layers
                          (Plan(dp=1, tp=4), 64 * 8 * scores / 4),  # heads split over TP
                          (Plan(dp=4, gc=True), 16 * scores)):      # only the recomputed layer
        extra = estimate_memory(heads, plan).activations - estimate_memory(SPEC, plan).activations
        assert extra == pytest.approx(per_gpu)
    assert "heads" not in SPEC.to_row() and heads.to_row()["heads"] == 16
    # the plan search sees the scores too: the best plan without them no longer fits one GPU
    big = dataclasses.replace(SPEC, seq_len=4096, heads=32)
    flash = best_plan(dataclasses.replace(big, heads=0), NOMINAL_PARAMS, 1, 8,
                      cluster=REFERENCE_CLUSTER)
    stored = best_plan(big, NOMINAL_PARAMS, 1, 8, cluster=REFERENCE_CLUSTER)
    assert flash is not None and stored is not None
    assert stored.gpu_bytes == pytest.approx(estimate_memory(big, stored.plan).gpu_bytes)
    assert estimate_memory(big, flash.plan).gpu_bytes > 0.9 * REFERENCE_CLUSTER.gpu_mem_bytes
    assert stored.plan != flash.plan
    with pytest.raises(InputError, match="model.heads"):
        dataclasses.replace(SPEC, heads=-1)


def test_oom_plans_are_excluded() -> None:
    spec = SHAPES["gpt-30b"]
    plain = estimate_memory(spec, Plan(dp=8))
    assert plain.gpu_bytes > REFERENCE_CLUSTER.gpu_mem_bytes  # 30B plain DP cannot fit
    best = best_plan(spec, NOMINAL_PARAMS, 8, 64, cluster=REFERENCE_CLUSTER)
    assert best is not None
    assert best.gpu_bytes <= 0.9 * REFERENCE_CLUSTER.gpu_mem_bytes
    assert estimate_memory(spec, best.plan).gpu_bytes == pytest.approx(best.gpu_bytes)
    assert best_plan(spec, NOMINAL_PARAMS, 1, 8, cluster=REFERENCE_CLUSTER) is None


def _mlp(torch, dtype):
    layers = []
    for fan_in, fan_out in [(64, 256), (256, 512), (512, 128), (128, 10)]:
        layers += [torch.nn.Linear(fan_in, fan_out), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1]).to(dtype)


def _nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def test_weights_grads_adam_match_torch_fp32() -> None:
    torch = pytest.importorskip("torch", reason="PyTorch not installed (extra 'torch')")
    torch.manual_seed(0)
    model = _mlp(torch, torch.float32)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(32, 64)).square().mean().backward()
    opt.step()
    params = list(model.parameters())
    count = sum(p.numel() for p in params)
    states = [v for st in opt.state.values() for k, v in st.items() if k in ("exp_avg", "exp_avg_sq")]
    spec = ModelSpec(name="mlp", params=count, layers=4, hidden=64, seq_len=1, global_batch=32,
                     fwd_time_1gpu=1.0, bytes_per_param=4.0)
    est = estimate_memory(spec, Plan(dp=1))
    assert est.weights == _nbytes(params)
    assert est.grads == _nbytes(p.grad for p in params)
    assert est.optimizer == _nbytes(states)  # fp32: m and v, no master copy


def test_weights_grads_adam_match_torch_mixed_precision() -> None:
    torch = pytest.importorskip("torch", reason="PyTorch not installed (extra 'torch')")
    torch.manual_seed(0)
    model = _mlp(torch, torch.bfloat16)
    master = [p.detach().float().requires_grad_(True) for p in model.parameters()]
    opt = torch.optim.Adam(master, lr=1e-3)
    model(torch.randn(32, 64, dtype=torch.bfloat16)).float().square().mean().backward()
    for m, p in zip(master, model.parameters()):
        m.grad = p.grad.float()
    opt.step()
    params = list(model.parameters())
    states = [v for st in opt.state.values() for k, v in st.items() if k in ("exp_avg", "exp_avg_sq")]
    spec = ModelSpec(name="mlp", params=sum(p.numel() for p in params), layers=4, hidden=64,
                     seq_len=1, global_batch=32, fwd_time_1gpu=1.0, bytes_per_param=2.0)
    est = estimate_memory(spec, Plan(dp=1))
    assert est.weights == _nbytes(params) and est.grads == _nbytes(p.grad for p in params)
    assert est.optimizer == _nbytes(master) + _nbytes(states)  # fp32 master + m + v
    # ZeRO-Offload keeps those optimizer bytes and the β-byte gradient on the host
    off = estimate_memory(spec, Plan(dp=1, zero="offload"))
    assert off.host_bytes == _nbytes(master) + _nbytes(states) + _nbytes(p.grad for p in params)


def test_static_memory_matches_cuda_allocator() -> None:
    torch = pytest.importorskip("torch", reason="PyTorch not installed (extra 'torch')")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: torch.cuda.memory_allocated check needs a GPU")
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(8)]).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(4, 1024, device="cuda")).square().mean().backward()
    opt.step()
    torch.cuda.synchronize()
    static = torch.cuda.memory_allocated() - base  # activations are freed after backward
    count = sum(p.numel() for p in model.parameters())
    spec = ModelSpec(name="mlp", params=count, layers=8, hidden=1024, seq_len=1, global_batch=4,
                     fwd_time_1gpu=1.0, bytes_per_param=4.0)
    est = estimate_memory(spec, Plan(dp=1))
    assert static == pytest.approx(est.weights + est.grads + est.optimizer, rel=0.02)
    assert torch.cuda.max_memory_allocated() - base >= est.weights + est.grads + est.optimizer
