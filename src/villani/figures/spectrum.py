"""Fig 4: top-k eigenvalues of ∇²F and λ_max/λ_median against ‖θ‖² across checkpoints (λ > 0).

Left: the ``measure.top_k`` largest eigenvalues (Lanczos with full re-orthogonalisation)
of every checkpoint of every seed, as small points; λ_max as a line per seed with its
Ritz residual as the error bar. Right: the spectral ratio λ_max/λ_median, λ_median the
median of the SLQ spectral density. Both against ‖θ‖² of the checkpoint.
"""

from __future__ import annotations

from typing import Callable, Mapping

import matplotlib.pyplot as plt

from villani.figures.style import lam_color, lam_label, note, value_axis
from villani.io.results import eigen_frame, measurements


def render(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    m = measurements(params, root)
    m = m[m["lam"] > 0].reset_index(drop=True)
    if m.empty:
        raise ValueError("Fig 4 needs a λ > 0 in train.lambdas")
    eig = eigen_frame(m)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11.5, 4.3))
    for lam, e in eig.groupby("lam"):
        c = lam_color(lam)
        a1.scatter(e["theta_sq_norm"], e["eigenvalue"], s=9, color=c, alpha=0.35, lw=0)
        for k, (seed, d) in enumerate(m[m["lam"] == lam].groupby("seed")):
            d = d.sort_values("step")
            a1.errorbar(d["theta_sq_norm"], d["lambda_max"], yerr=d["lambda_max_residual"], color=c, marker="o",
                        ms=4, lw=1.3, capsize=2, label=f"{lam_label(lam)}: λ_max" if k == 0 else None)
            a2.plot(d["theta_sq_norm"], d["spectral_ratio"], color=c, marker="o", ms=4, lw=1.3,
                    label=lam_label(lam) if k == 0 else None)
    value_axis(a1, eig["eigenvalue"])
    value_axis(a1, eig["theta_sq_norm"], axis="x", decades=1.0)
    value_axis(a2, m["spectral_ratio"])
    value_axis(a2, m["theta_sq_norm"], axis="x", decades=1.0)
    k = int(m["top_k"].max())
    a1.set(xlabel="‖θ‖² at the checkpoint", ylabel="eigenvalue of ∇²F",
           title=f"Top-{k} Hessian eigenvalues (points), λ_max ± Ritz residual (lines)")
    a2.set(xlabel="‖θ‖² at the checkpoint", ylabel="λ_max / λ_median", title="Spectral ratio (SLQ median)")
    a1.legend()
    a2.legend()
    undefined = int(m["spectral_ratio"].isna().sum())
    note(a2, "one line per seed, in step order" + (f"\n{undefined} checkpoint(s) with λ_median ≤ 0:\nratio undefined, "
                                                  "not drawn" if undefined else ""), loc="upper left")
    note(a1, "one line per seed, in step order", loc="upper left")
    fig.suptitle(f"{params['data']['name']}: Hessian spectrum of F across checkpoints (λ > 0)", y=1.02)
    fig.tight_layout()
    table = eig.merge(m[["lam", "seed", "step", "lambda_max", "lambda_median", "spectral_ratio"]],
                      on=["lam", "seed", "step"])
    return save(fig, table, params, root, name)
