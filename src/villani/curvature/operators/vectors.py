r"""How flat parameter-space vectors are laid out: whole on one process, or sharded across
processes the way FSDP2 shards parameters.

By default a process holds whole vectors (:class:`LocalVectors`). An operator whose
vectors are sharded sets ``vectors`` to a :class:`ShardedVectors`, which has the same
methods: ``local_dim`` (entries held here), ``sum`` (add up per-process partial sums),
``dot``/``norm``/``amax`` (global inner products, norms, largest entry), ``probes`` (this
process's part of the single-process probe stream) and ``local_index`` (a block of global
coordinates in local coordinates). The estimators reduce every coordinate sum through
:func:`operator_vectors` of their operator, so they run unchanged on sharded vectors, and
on whole vectors the layout adds nothing (sums pass through, ``dot``/``norm`` are
``torch.dot``/``torch.linalg.vector_norm``).

The flat vector of a model is the concatenation of its parameter tensors in
``named_parameters`` order (as in :class:`~.model_hessian.ModelHessian`). FSDP2
(``torch.distributed.fsdp.fully_shard``) splits every tensor along its first dimension
into :math:`R` chunks of :math:`\lceil n_0/R\rceil` rows (``torch.chunk``; the last
ranks may get fewer rows or none), so process :math:`r` holds, for each tensor at flat
offset :math:`o` with :math:`n_0` rows of :math:`c` entries, the flat range

.. math::
    \big[o + \min(r\lceil n_0/R\rceil, n_0)\,c,\; o + \min((r+1)\lceil n_0/R\rceil, n_0)\,c\big).

A *sharded vector* on process :math:`r` is the concatenation of the entries of those
ranges, in flat order: ``local_dim`` ≈ d/R entries, never the whole d-vector. Probes,
Lanczos vectors and Hessian-vector products are sharded that way, matching the local
shards of the parameters and of their gradients (``DTensor.to_local()``).

Reductions: a coordinate sum :math:`\sum_i x_i` is the all-reduced sum of per-process
partial sums (:meth:`ShardedVectors.sum`), so :math:`\langle a, b\rangle` and
:math:`\|a\|` are one all-reduce of one scalar each. The estimators of this package call
these through the operator's ``vectors`` attribute (:func:`operator_vectors`), so
:func:`~villani.curvature.trace.hutchinson.hutchinson`, :func:`~villani.curvature.spectrum.lanczos.lanczos`,
:func:`~villani.curvature.spectrum.lanczos.top_eigenvalues` and :func:`~villani.curvature.spectrum.slq.slq` run on a sharded operator
unchanged; their results agree with the single-process ones up to the rounding of the
order of summation.

**Probes.** :class:`ShardedProbeStream` of seed :math:`s` gives, on each process, exactly
the entries it holds of the single-process probes :class:`~villani.curvature.probes.ProbeStream` of
:math:`s` (concatenated over processes in flat order they *are* those probes). The CPU
generator draws one 32-bit number per entry, sequentially, so every process draws all
d entries of each probe in chunks and keeps its own: O(chunk + d/R) memory and O(d)
time per probe per process (about 5 ns per entry on one CPU core: 35 s per probe at
d = 7·10⁹, paid in parallel by every process). That is the price of keeping the
single-process probe stream — and with it every result computed so far — unchanged; a
counter-based generator could skip to its own ranges in O(d/R).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch import Tensor

from ..probes import ProbeStream

__all__ = ["LocalVectors", "operator_vectors", "ShardedVectors", "ShardedProbeStream", "fsdp_ranges", "fsdp_param_ranges"]


class LocalVectors:
    """Whole vectors of length ``dim`` held by this process (the default layout).

    Every method is the plain single-process operation, so an estimator written against
    this interface computes exactly what it computes on plain tensors.
    """

    def __init__(self, dim: int):
        self.dim = self.local_dim = int(dim)

    def sum(self, partial: Tensor) -> Tensor:
        """Partial coordinate sums are already total sums: returned as they are."""
        return partial

    def dot(self, a: Tensor, b: Tensor) -> Tensor:
        r""":math:`\langle a, b\rangle` (``torch.dot``)."""
        return torch.dot(a, b)

    def norm(self, a: Tensor) -> Tensor:
        r""":math:`\|a\|` (``torch.linalg.vector_norm``)."""
        return torch.linalg.vector_norm(a)

    def amax(self, a: Tensor) -> Tensor:
        r""":math:`\|a\|_\infty`."""
        return a.abs().max()

    def probes(self, seed: int, *, dtype: torch.dtype, device: torch.device) -> ProbeStream:
        """The Rademacher probe stream of ``seed`` (:class:`~villani.curvature.probes.ProbeStream`)."""
        return ProbeStream(self.dim, seed, dtype=dtype, device=device)

    def local_index(self, index):
        """A block's index (slice or index tensor), unchanged."""
        return index


def operator_vectors(op):
    """How ``op``'s vectors are laid out: its ``vectors`` attribute, else
    :class:`LocalVectors` of length ``op.dim``."""
    vectors = getattr(op, "vectors", None)
    return vectors if vectors is not None else LocalVectors(op.dim)


def fsdp_param_ranges(shapes: Sequence[Sequence[int]], rank: int, world_size: int) -> list[tuple[int, int]]:
    """Per parameter of ``shapes`` (in flat order), the flat range ``(start, stop)`` that
    ``rank`` of ``world_size`` holds under FSDP2's dim-0 sharding (``start == stop``
    when it holds none of it). A 0-dim tensor counts as one row."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, {world_size}), got {rank}")
    out, offset = [], 0
    for shape in shapes:
        shape = tuple(int(s) for s in shape)
        rows = shape[0] if shape else 1
        numel = math.prod(shape)
        per_row = numel // rows if rows else 0
        chunk = -(-rows // world_size)
        lo, hi = min(rank * chunk, rows), min((rank + 1) * chunk, rows)
        out.append((offset + lo * per_row, offset + hi * per_row))
        offset += numel
    return out


def fsdp_ranges(shapes: Sequence[Sequence[int]], rank: int, world_size: int) -> list[tuple[int, int]]:
    """The non-empty ranges of :func:`fsdp_param_ranges`: the flat entries ``rank`` holds."""
    return [(a, b) for a, b in fsdp_param_ranges(shapes, rank, world_size) if b > a]


class ShardedProbeStream(ProbeStream):
    """This process's entries of the Rademacher probes of ``seed`` (see module doc).

    ``next(k)`` returns a ``(k, local_dim)`` tensor equal to
    ``ProbeStream(dim, seed).next(k)[:, owned entries]``; ``chunks`` as :class:`ProbeStream`'s.
    """

    def __init__(self, vectors: ShardedVectors, seed: int, *, dtype: torch.dtype, device: torch.device,
                 chunk: int = 1 << 22):
        super().__init__(vectors.dim, seed, dtype=dtype, device=device)
        self.vectors = vectors
        self.chunk = int(chunk)  # entries drawn per generator call (memory, not values)

    def _one(self, out: Tensor) -> None:
        dim, ranges = self.vectors.dim, self.vectors.ranges
        starts = self.vectors.local_starts
        j = 0
        for begin in range(0, dim, self.chunk):
            end = min(begin + self.chunk, dim)
            bits = torch.randint(0, 2, (end - begin,), generator=self._gen, dtype=torch.int8)
            while j < len(ranges) and ranges[j][0] < end:
                a, b = max(ranges[j][0], begin), min(ranges[j][1], end)
                local = starts[j] + a - ranges[j][0]
                out[local : local + b - a] = bits[a - begin : b - begin]
                if ranges[j][1] > end:
                    break
                j += 1

    def next(self, k: int = 1) -> Tensor:
        """The next ``k`` probes' local entries, ``(k, local_dim)``."""
        bits = torch.empty((k, self.vectors.local_dim), dtype=torch.int8)
        for i in range(k):
            self._one(bits[i])
        return bits.mul_(2).sub_(1).to(device=self.device, dtype=self.dtype)


class ShardedVectors:
    r"""The layout of flat d-vectors over the processes of ``group`` (see module doc).

    Args:
        shapes: the parameter shapes, in flat order.
        group: the process group (default: the world). ``torch.distributed`` must be
            initialised.

    Attributes:
        dim: d, the global length.
        rank, world_size: of this process in ``group``.
        ranges: the flat ranges held here, in order; ``local_dim`` their total length.
        all_ranges: every rank's ranges (for :meth:`gather` / :meth:`reduce_scatter`).
    """

    def __init__(self, shapes: Sequence[Sequence[int]], group=None):
        if not dist.is_available() or not dist.is_initialized():
            raise ValueError("ShardedVectors needs torch.distributed initialised (init_process_group)")
        self.group = group
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        self.dim = int(sum(math.prod(tuple(s)) for s in shapes))
        self.all_ranges = [fsdp_ranges(shapes, r, self.world_size) for r in range(self.world_size)]
        self.ranges = self.all_ranges[self.rank]
        self.local_starts, start = [], 0
        for a, b in self.ranges:
            self.local_starts.append(start)
            start += b - a
        self.local_dim = start
        self._sizes = [sum(b - a for a, b in rr) for rr in self.all_ranges]

    # ------------------------------------------------------------------ reductions
    def sum(self, partial: Tensor) -> Tensor:
        """Elementwise sum over the processes of per-process partial sums (all-reduce)."""
        total = partial.detach().clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM, group=self.group)
        return total

    def dot(self, a: Tensor, b: Tensor) -> Tensor:
        r""":math:`\langle a, b\rangle` of two sharded vectors (a 0-dim tensor, the same on every process)."""
        return self.sum(torch.dot(a, b))

    def norm(self, a: Tensor) -> Tensor:
        r""":math:`\|a\|` of a sharded vector."""
        return self.sum(torch.dot(a, a)).sqrt()

    def amax(self, a: Tensor) -> Tensor:
        r""":math:`\|a\|_\infty` of a sharded vector (all-reduce MAX)."""
        m = a.abs().max() if a.numel() else torch.zeros((), dtype=a.dtype, device=a.device)
        m = m.detach().clone().reshape(1)
        dist.all_reduce(m, op=dist.ReduceOp.MAX, group=self.group)
        return m[0]

    def probes(self, seed: int, *, dtype: torch.dtype, device: torch.device) -> ShardedProbeStream:
        """This process's entries of the probe stream of ``seed``."""
        return ShardedProbeStream(self, seed, dtype=dtype, device=device)

    # ------------------------------------------------------------------ indexing
    def local_index(self, index: slice | Tensor) -> Tensor:
        """Local positions of the held entries of a block of global coordinates (a slice
        or an index tensor), in the block's order; empty if none is held here."""
        if isinstance(index, slice):
            pieces = []
            for (a, b), s in zip(self.ranges, self.local_starts):
                lo, hi = max(a, index.start), min(b, index.stop)
                if hi > lo:
                    pieces.append(torch.arange(s + lo - a, s + hi - a))
            return torch.cat(pieces) if pieces else torch.zeros(0, dtype=torch.long)
        index = torch.as_tensor(index, dtype=torch.long).cpu()
        local = self._local_position(index)
        return local[local >= 0].to(index.device)

    def _local_position(self, index: Tensor) -> Tensor:
        """Local position of each global index, −1 where it is not held here."""
        out = torch.full_like(index, -1)
        for (a, b), s in zip(self.ranges, self.local_starts):
            held = (index >= a) & (index < b)
            out[held] = index[held] - a + s
        return out

    def shard(self, full: Tensor) -> Tensor:
        """The held entries of a whole vector (last dim d) — for tests and small models."""
        if full.shape[-1] != self.dim:
            raise ValueError(f"expected a last dimension of {self.dim}, got {tuple(full.shape)}")
        return torch.cat([full[..., a:b] for a, b in self.ranges], dim=-1) if self.ranges else full[..., :0]

    def gather(self, local: Tensor) -> Tensor:
        """The whole d-vector from every process's shard (all-gather; O(d) memory on every
        process — only for operators whose parameters are replicated anyway)."""
        padded = self._padded(local)
        every = torch.empty(self.world_size * padded.numel(), dtype=local.dtype, device=local.device)
        dist.all_gather_single(every, padded, group=self.group)
        every = every.view(self.world_size, padded.numel())
        full = torch.empty(self.dim, dtype=local.dtype, device=local.device)
        for r, rr in enumerate(self.all_ranges):
            at = 0
            for a, b in rr:
                full[a:b] = every[r, at : at + b - a]
                at += b - a
        return full

    def reduce_scatter(self, full: Tensor) -> Tensor:
        """This process's entries of the sum over processes of whole d-vectors (reduce-scatter)."""
        if full.shape != (self.dim,):
            raise ValueError(f"expected a vector of shape ({self.dim},), got {tuple(full.shape)}")
        width = max(self._sizes)
        blocks = torch.zeros((self.world_size, width), dtype=full.dtype, device=full.device)
        for r, rr in enumerate(self.all_ranges):
            at = 0
            for a, b in rr:
                blocks[r, at : at + b - a] = full[a:b]
                at += b - a
        out = torch.empty(width, dtype=full.dtype, device=full.device)
        dist.reduce_scatter_single(out, blocks.reshape(-1), op=dist.ReduceOp.SUM, group=self.group)
        return out[: self.local_dim]

    def _padded(self, local: Tensor) -> Tensor:
        if local.shape != (self.local_dim,):
            raise ValueError(f"expected a shard of shape ({self.local_dim},), got {tuple(local.shape)}")
        width = max(self._sizes)
        if width == self.local_dim:
            return local.contiguous()
        return torch.cat([local, local.new_zeros(width - self.local_dim)])
