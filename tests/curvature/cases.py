"""Shared test cases for the curvature engine: dense float64 matrices with a known
spectrum, tiny causal LMs of every supported family (a couple of thousand parameters
each) and their autograd loss."""

from __future__ import annotations

import numpy as np
import torch
from torch.func import functional_call
from transformers import (
    AutoModelForCausalLM,
    CohereConfig,
    GPT2Config,
    GPTJConfig,
    GPTNeoConfig,
    GPTNeoForCausalLM,
    GPTNeoXConfig,
    LlamaConfig,
)

from villani.curvature import causal_lm_token_loss


def matrix_with_spectrum(eigenvalues, seed: int) -> torch.Tensor:
    """Q diag(λ) Qᵀ in float64 with a Haar-random orthogonal Q fixed by ``seed``."""
    lam = torch.as_tensor(np.asarray(eigenvalues, dtype=np.float64))
    gen = torch.Generator().manual_seed(seed)
    Z = torch.randn(lam.numel(), lam.numel(), generator=gen, dtype=torch.float64)
    Q, R = torch.linalg.qr(Z)
    Q = Q * torch.sign(torch.diagonal(R))
    A = (Q * lam) @ Q.T
    return 0.5 * (A + A.T)


def gpt_neo(
    *, vocab: int, hidden: int, layers: int = 2, heads: int = 2, positions: int = 16, window: int = 4,
    seed: int = 0, dtype=torch.float32,
) -> GPTNeoForCausalLM:
    """A GPT-Neo with alternating global/local attention layers, eager attention, no dropout."""
    attention = [[["global", "local"], layers // 2]] + ([[["global"], 1]] if layers % 2 else [])
    cfg = GPTNeoConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        max_position_embeddings=positions,
        attention_types=attention,
        window_size=window,
        intermediate_size=4 * hidden,
        embed_dropout=0.0,
        attention_dropout=0.0,
        resid_dropout=0.0,
        bos_token_id=0,
        eos_token_id=0,
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    return GPTNeoForCausalLM(cfg).to(dtype).eval()


def tiny_gpt_neo(dtype=torch.float64, seed: int = 0, vocab: int = 32, hidden: int = 8) -> GPTNeoForCausalLM:
    """A 2-layer GPT-Neo (one global, one local attention layer, window 4), moved away from
    its initialisation so every block has non-trivial curvature."""
    model = gpt_neo(vocab=vocab, hidden=hidden, seed=seed, dtype=dtype)
    with torch.no_grad():
        gen = torch.Generator().manual_seed(seed + 1)
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen, dtype=dtype))
    return model


def _jittered(cfg, *, seed: int, dtype) -> torch.nn.Module:
    """A model of ``cfg`` (eager attention, eval mode) built and moved away from its
    initialisation in float32 — 0.3 × standard normal on every parameter, so every block
    has non-trivial curvature — then cast to ``dtype``: one point θ for every dtype."""
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg).float()
    with torch.no_grad():
        gen = torch.Generator().manual_seed(seed + 1)
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen))
    return model.to(dtype).eval()


def tiny_gpt2(dtype=torch.float64, seed: int = 0, vocab: int = 32, hidden: int = 8):
    """GPT-2: learned positions, fused ``c_attn`` (Conv1D), LayerNorm, tied embeddings."""
    cfg = GPT2Config(vocab_size=vocab, n_embd=hidden, n_layer=2, n_head=2, n_positions=16, n_inner=4 * hidden,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    return _jittered(cfg, seed=seed, dtype=dtype)


def tiny_gpt_neox(dtype=torch.float64, seed: int = 0, vocab: int = 32, hidden: int = 8):
    """GPT-NeoX/Pythia: partial rotary (25% here), fused ``query_key_value``, parallel
    residual, untied ``embed_out``."""
    cfg = GPTNeoXConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=4 * hidden, max_position_embeddings=16, rotary_pct=0.5,
                        hidden_dropout=0.0, attention_dropout=0.0, tie_word_embeddings=False,
                        bos_token_id=0, eos_token_id=0)
    return _jittered(cfg, seed=seed, dtype=dtype)


def tiny_llama(dtype=torch.float64, seed: int = 0, vocab: int = 32, hidden: int = 8, *, tied: bool = False,
               kv_heads: int = 2):
    """Llama: RMSNorm, rotary, SwiGLU, no biases; 4 query heads sharing ``kv_heads`` key/value
    heads (grouped-query attention when ``kv_heads < 4``), tied or untied embeddings."""
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=kv_heads, intermediate_size=12, max_position_embeddings=16,
                      tie_word_embeddings=tied, bos_token_id=0, eos_token_id=0)
    return _jittered(cfg, seed=seed, dtype=dtype)


def tiny_gptj(dtype=torch.float64, seed: int = 0, vocab: int = 32, hidden: int = 8):
    """GPT-J: its output layer has a bias, so the fused linear head/cross-entropy node does
    not apply."""
    cfg = GPTJConfig(vocab_size=vocab, n_embd=hidden, n_layer=1, n_head=2, rotary_dim=2, n_positions=16,
                     n_inner=2 * hidden, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     bos_token_id=0, eos_token_id=0, tie_word_embeddings=False)
    return _jittered(cfg, seed=seed, dtype=dtype)


def tiny_cohere(dtype=torch.float64, seed: int = 0, vocab: int = 32, hidden: int = 8):
    """Cohere: a bias-free linear head whose logits are then scaled (``logit_scale``), so
    ``base_model`` + head does not reproduce the logits and the fused node must not apply."""
    cfg = CohereConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=1, num_attention_heads=2,
                       num_key_value_heads=2, intermediate_size=12, max_position_embeddings=16, logit_scale=0.5,
                       bos_token_id=0, eos_token_id=0, pad_token_id=None)
    return _jittered(cfg, seed=seed, dtype=dtype)


FAMILIES = {
    "gpt_neo": lambda dtype=torch.float64: tiny_gpt_neo(dtype),
    "gpt2": tiny_gpt2,
    "gpt_neox": tiny_gpt_neox,
    "llama": tiny_llama,
    "llama_tied_gqa": lambda dtype=torch.float64: tiny_llama(dtype, tied=True, kv_heads=1),
}
"""Builders of the tiny model of each supported family (``config.model_type`` is the
part before any ``_tied``/``_gqa`` suffix)."""


def tiny_causal_lm(family: str, dtype=torch.float64) -> torch.nn.Module:
    """The tiny model of ``family`` (a key of :data:`FAMILIES`)."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {sorted(FAMILIES)}, got {family!r}")
    return FAMILIES[family](dtype=dtype)


class ShiftedLogits(torch.nn.Module):
    """``x -> logits[:, :-1]`` flattened to ``(B (T−1), V)``, with the LM's parameters: the
    ``criterion(model(x), y)`` interface of PyHessian and curvlinops, ``y = x[:, 1:]``."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, x):
        logits = self.lm(input_ids=x, use_cache=False).logits
        return logits[:, :-1, :].reshape(-1, logits.shape[-1])


def shifted_targets(x: torch.Tensor) -> torch.Tensor:
    """The targets matching :class:`ShiftedLogits`."""
    return x[:, 1:].reshape(-1)


def token_batches(vocab: int = 32, seed: int = 0, shapes=((3, 8), (2, 6))) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, s, generator=gen) for s in shapes]


def reference_loss(model, names, shapes, batches):
    """F_data(flat θ) by functional_call, for the autograd reference Hessian."""
    sizes = [int(np.prod(s)) for s in shapes]
    n_tokens = sum(b.shape[0] * (b.shape[1] - 1) for b in batches)

    def fn(flat):
        params = {n: c.view(s) for n, c, s in zip(names, torch.split(flat, sizes), shapes)}
        total = 0.0
        for x in batches:
            logits = functional_call(model, params, args=(), kwargs={"input_ids": x, "use_cache": False}).logits
            total = total + causal_lm_token_loss(logits, x)
        return total / n_tokens

    return fn
