r"""Hessian-vector products by central differences of gradients, on sharded parameters.

.. math::
    \nabla^2F\,v \approx \frac{\nabla L(\theta+\varepsilon v) - \nabla L(\theta-\varepsilon v)}{2\varepsilon}
    + \lambda\, m\odot v

Two gradients per product, and nothing but the training stack's own first-order
machinery: on a model sharded with FSDP2 (``fully_shard``) every process perturbs its
own shard of θ by its shard of :math:`\varepsilon v`, runs FSDP2's sharded forward and
backward, and reads its shard of the gradient — no process ever holds a whole d-vector
or the whole model, and no double backward is needed (FSDP2 has none, see
:mod:`.data_parallel_hessian`), so any attention kernel works (flash/SDPA included). On a
plain model on one process the same code runs on whole vectors.

**Error and the choice of ε.** Let :math:`u` be the unit round-off of the dtype the
forward runs in (:math:`2^{-24}` fp32, :math:`2^{-8}` bf16, :math:`2^{-53}` fp64), and
measure steps in RMS weights, :math:`\rho = \|\theta\|/\sqrt d`. The step is

.. math::
    \varepsilon = h\,\rho/\|v\|_\infty ,

so that no coordinate moves by more than :math:`h` RMS weights (for a Rademacher
:math:`v` every coordinate moves by exactly :math:`h\rho`, the same as
:math:`\varepsilon = h\|\theta\|/\|v\|`; but Lanczos vectors converge to eigenvectors
that concentrate on few coordinates — the top one of the test model has
:math:`\max_i|q_i| = 0.34` in d = 2096 — and :math:`h\|\theta\|/\|q\|` would move those
:math:`\sqrt d\max_i|q_i| \approx 15` times further: a 39% error on the top eigenvalue
direction, measured). Taylor expansion gives the truncation error

.. math::
    \frac{\nabla L(\theta+\varepsilon v)-\nabla L(\theta-\varepsilon v)}{2\varepsilon} - \nabla^2L\,v
    = \frac{\varepsilon^2}{6}\nabla^3L[v,v,\cdot] + O(\varepsilon^4),

a relative error :math:`\kappa^2h^2/6` when the curvature along :math:`v` changes over a
distance :math:`\rho/\kappa` (per-coordinate moves :math:`h\rho`). Round-off enters
first through the perturbed point itself: :math:`\theta_i \pm \varepsilon v_i` is stored
with an error of about :math:`u|\theta_i|`, a random displacement that the quotient
divides by :math:`2\varepsilon`, a relative error :math:`\approx C u/h`; the gradients'
own rounding adds a term of the same form. So

.. math::
    \text{error}(h) \approx \frac{\kappa^2h^2}{6} + \frac{C\,u}{h},\qquad
    h^\ast = \Big(\frac{3Cu}{\kappa^2}\Big)^{1/3},\qquad
    \text{error}(h^\ast) \approx \frac32\,\frac{C\,u}{h^\ast}.

Measured against the exact product (``benchmarks/sharded.py``; table in
``docs/curvature.md``) on three GPT-Neo points — at initialisation, trained to near the
source entropy, and the test suite's tiny model with large weights: :math:`C \approx
0.75\text{–}4` (fp32) and :math:`\kappa \approx 5` (trained, Rademacher directions), 12–15
(trained top eigenvectors; initialisation), 50–130 (tiny model, Rademacher / top
eigenvectors). The curvature changes much faster than on the weights' own scale
(:math:`\kappa = 1` would give :math:`h = (3u)^{1/3}`, 13× too large). The default
(:func:`default_rel_step`) takes :math:`C = 1`, :math:`\kappa = 50` — safe for the
sharpest point: :math:`h` = 4.2e-4 in fp32, where the measured error is 1.1e-4 to 6.2e-4
on all three points and both kinds of direction (each point's best :math:`h` gives 6e-5
to 3e-4); 1.7e-2 in bf16 (measured 6e-2 to 0.56); 5.1e-7 in fp64. Pass ``rel_step`` to
override. bf16 finite differences are only good to tens of percent: the step must be
large for :math:`\theta\pm\varepsilon v` to differ from θ at all, and then truncation
dominates (FSDP2 mixed precision — fp32 shards, bf16 compute — is no better: 6e-2 to
0.17, because θ ± εv is rounded to bf16 when the shards are cast).

A model that computes part of its forward in float32 even in float64 (GPT-Neo's and
Llama's attention softmax, Llama's RMSNorm) has the round-off of float32 there: pass
``compute_dtype=torch.float32``.

The perturbed point is formed in float64 and rounded once to the parameters' dtype; θ is
restored from a saved copy of this process's shard (bitwise) — the parameters' version
counters do change, so a :class:`~.model_hessian.ModelHessian` built on the same model
before a product will refuse to run afterwards. The difference of the two
gradients is taken in at least float32, and vectors (``dtype``) are at least float32 even
for bf16 parameters.

Gradients: process :math:`r` takes the batches ``batches[r::R]``; each runs the same
number of forward/backward passes (FSDP2's collectives must match; a process short of
batches repeats its first one with weight 0), and every token weighs :math:`1/N`. The
loss of each pass is multiplied by :math:`R` because FSDP2 reduces gradients as a mean
over processes (its default; do not change the gradient divide factor).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from .causal_lm_loss import batch_token_loss
from .hessian import Decay, HessianOperator
from .vectors import ShardedVectors, fsdp_param_ranges

__all__ = ["FiniteDifferenceHessian", "default_rel_step"]


def default_rel_step(dtype: torch.dtype, kappa: float = 50.0) -> float:
    r""":math:`h^\ast = (3u/\kappa^2)^{1/3}` for the unit round-off :math:`u` of ``dtype``
    (the optimum of the error model in the module doc with :math:`C = 1`)."""
    return (3.0 * torch.finfo(dtype).eps / 2.0 / kappa**2) ** (1.0 / 3.0)


def _is_sharded(p: Tensor) -> bool:
    from torch.distributed.tensor import DTensor

    return isinstance(p, DTensor)


class FiniteDifferenceHessian(HessianOperator):
    r""":math:`\nabla^2F(\theta)` of a causal LM by central differences of (sharded) gradients.

    Args:
        model: a Hugging Face causal LM, either plain or sharded with FSDP2
            ``fully_shard`` (then every process of ``group`` builds this operator, and
            vectors are its shards: ``vectors``). Any dtype; any attention kernel.
        batches: all token batches, the same list on every process (process ``r`` uses
            ``batches[r::R]``).
        lam: λ of the regulariser :math:`\frac\lambda2\|m\odot\theta\|^2` (exact).
        decay: which parameters λ applies to: ``None`` (all trainable), names, or a
            predicate ``(name, param) -> bool``.
        rel_step: :math:`h`, the largest coordinate move in RMS weights
            (:math:`\varepsilon = h\,\mathrm{rms}(\theta)/\|v\|_\infty`); default
            :func:`default_rel_step` of ``compute_dtype``.
        compute_dtype: the dtype the forward runs in, which sets the round-off — pass
            FSDP2's ``MixedPrecisionPolicy.param_dtype`` when it casts; default the
            parameters' dtype.
        group: the process group of a sharded model (default: the world).

    Attributes:
        dim: d; ``vectors``: the layout (sharded for an FSDP2 model, whole otherwise);
        dtype: of vectors (the parameters' dtype, at least float32); device; names;
        num_tokens; rel_step; ``gradients``: gradients computed so far (2 per product).
    """

    def __init__(
        self,
        model: nn.Module,
        batches: Sequence[Tensor] | Tensor,
        *,
        lam: float = 0.0,
        decay: Decay = None,
        rel_step: float | None = None,
        compute_dtype: torch.dtype | None = None,
        group=None,
    ):
        model.eval()
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        if not named:
            raise ValueError("model has no trainable parameters")
        self._params = [p for _, p in named]
        flags = {_is_sharded(p) for p in self._params}
        if len(flags) != 1:
            raise ValueError("parameters must be all FSDP2-sharded (DTensor) or all plain tensors")
        self.sharded = flags.pop()
        param_dtype = self._params[0].dtype
        local_shapes = [t.shape for t in self._locals()]
        vectors = None
        if self.sharded:
            shapes = [p.shape for p in self._params]
            vectors = ShardedVectors(shapes, group)
            self._rank, self._world = vectors.rank, vectors.world_size
            expected = [b - a for a, b in fsdp_param_ranges(shapes, self._rank, self._world)]
            got = [s.numel() for s in local_shapes]
            if got != expected:
                raise ValueError("the model's shards are not FSDP2's dim-0 chunks of every parameter "
                                 f"(local sizes {got[:4]}…, expected {expected[:4]}…)")
        else:
            self._rank, self._world = 0, 1
        self._init_layout(named, decay, lam=lam, dtype=torch.promote_types(param_dtype, torch.float32),
                          device=self._locals()[0].device, vectors=vectors, local_shapes=local_shapes)
        self.model = model
        self.compute_dtype = compute_dtype or param_dtype
        self.rel_step = float(rel_step) if rel_step is not None else default_rel_step(self.compute_dtype)
        if not self.rel_step > 0:
            raise ValueError(f"rel_step must be positive, got {rel_step}")

        batches = [batches] if isinstance(batches, Tensor) else list(batches)
        if not batches or any(b.ndim != 2 or b.shape[1] < 2 for b in batches):
            raise ValueError("batches must be a non-empty list of (B, T≥2) token tensors")
        self.num_tokens = int(sum(b.shape[0] * (b.shape[1] - 1) for b in batches))
        mine = [b.to(self.device, dtype=torch.long) for b in batches[self._rank :: self._world]]
        passes = -(-len(batches) // self._world)
        first = batches[0].to(self.device, dtype=torch.long)
        scale = self._world / self.num_tokens
        self._passes = [(x, scale) for x in mine] + [(first, 0.0)] * (passes - len(mine))

        self._theta = torch.cat([t.detach().reshape(-1).clone() for t in self._locals()])
        self._theta_rms: float | None = None
        self._first_order: tuple[float, Tensor] | None = None
        self.gradients = 0

    # ------------------------------------------------------------------ helpers
    def _locals(self) -> list[Tensor]:
        """This process's part of every parameter (its FSDP2 shard, or the tensor)."""
        return [p.to_local() if _is_sharded(p) else p for p in self._params]

    def _set_params(self, eps: float = 0.0, v: Tensor | None = None) -> None:
        """Parameters ← θ + ε v, formed in float64 one tensor at a time and rounded once
        (θ itself, bitwise, when ``v`` is None)."""
        thetas = self._views(self._theta)
        steps = self._views(v) if v is not None else thetas
        with torch.no_grad():
            for t, theta, step in zip(self._locals(), thetas, steps):
                if v is None:
                    t.copy_(theta)
                else:
                    t.copy_(torch.add(theta.double(), step.double(), alpha=eps))

    def _check_unchanged(self) -> None:
        current = torch.cat([t.detach().reshape(-1) for t in self._locals()])
        if not torch.equal(current, self._theta):
            raise RuntimeError("model parameters changed since this FiniteDifferenceHessian was built; build a new one")

    def _gradient(self) -> tuple[float, Tensor]:
        """(L, this process's part of ∇L) at the model's current parameters."""
        for p in self._params:
            p.grad = None
        loss_sum = 0.0
        with torch.enable_grad():
            for x, scale in self._passes:
                loss = batch_token_loss(self.model, x, scale, "autograd")
                loss.backward()
                loss_sum += float(loss.detach()) / self._world
        grads = []
        for p, t in zip(self._params, self._locals()):
            g = p.grad
            g = torch.zeros_like(t) if g is None else (g.to_local() if _is_sharded(g) else g)
            grads.append(g.detach().reshape(-1).to(self.dtype))
        for p in self._params:
            p.grad = None
        self.gradients += 1
        total = self.vectors.sum(torch.tensor([loss_sum], dtype=torch.float64, device=self.device))
        return float(total[0]), torch.cat(grads)

    # ------------------------------------------------------------ the data term
    def _local_tensors(self) -> list[Tensor]:
        """This process's part of every parameter (:meth:`_locals`)."""
        return self._locals()

    def data_loss(self) -> float:
        """L(θ) over all batches."""
        return self._ensure_first_order()[0]

    def data_grad(self) -> Tensor:
        """This process's part of ∇L(θ)."""
        return self._ensure_first_order()[1].clone()

    def step(self, v: Tensor) -> float:
        r""":math:`\varepsilon = h\,\mathrm{rms}(\theta)/\|v\|_\infty` for the vector ``v``
        (global norms): no coordinate moves by more than :math:`h` RMS weights."""
        if self._theta_rms is None:
            rms = float(self.vectors.norm(self._theta.double())) / math.sqrt(self.dim)
            self._theta_rms = rms if rms > 0 else 1.0
        v_max = float(self.vectors.amax(v.double()))
        return 0.0 if v_max == 0.0 else self.rel_step * self._theta_rms / v_max

    # ------------------------------------------------------------------ products
    def _data_matmat(self, V: Tensor) -> Tensor:
        r"""Rows of central differences :math:`(\nabla L(\theta+\varepsilon v) -
        \nabla L(\theta-\varepsilon v))/2\varepsilon`, two gradients each."""
        self._check_unchanged()
        return torch.stack([self._central_difference(v) for v in V])

    def _central_difference(self, v: Tensor) -> Tensor:
        eps = self.step(v)
        if eps == 0.0:
            return torch.zeros(self.vectors.local_dim, dtype=self.dtype, device=self.device)
        try:
            self._set_params(eps, v)
            _, g_plus = self._gradient()
            self._set_params(-eps, v)
            _, g_minus = self._gradient()
        finally:
            self._set_params()
        return (g_plus - g_minus) / (2.0 * eps)

    def _ensure_first_order(self) -> tuple[float, Tensor]:
        self._check_unchanged()
        if self._first_order is None:
            self._first_order = self._gradient()
        return self._first_order
