"""The numbers docs/figures.md and docs/bounds.md quote are the code's: each is recomputed from the
paper's inputs with the ledger's functions and must appear in the document as printed. The docs
quote no number of a run (those live in the ledger and the generated docs/results.md)."""

from __future__ import annotations

import math

import pytest

from tests.conftest import REPO
from villani.bounds.theory import c_ls_upper, steps_required
from villani.claims.catalogue import fig2, fig5, fig6, scale, trace_numbers
from villani.claims.catalogue.paper import PAPER_D, PAPER_M

FIGURES = (REPO / "docs" / "figures.md").read_text()
BOUNDS = (REPO / "docs" / "bounds.md").read_text()


def _sci(x: float, digits: int = 2) -> str:
    """1.6·10⁻¹⁴ style (the docs' notation)."""
    exp = math.floor(math.log10(abs(x)))
    sup = str(exp).translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))
    return f"{x / 10**exp:.{digits}g}·10{sup}"


@pytest.mark.parametrize("text,value", [
    ("2η/C_LS(βF) = {}", _sci(fig5.envelope_fall(1e-2, 1_005_859)[0])),
    ("envelope falls by {}", _sci(fig5.envelope_fall(1e-2, 1_005_859)[1])),
    ("C_LS(F)/(2η) is {} steps", _sci(c_ls_upper(1e-2, PAPER_D) / 2e-4, 3)),
    ("is {}·d even with", f"−{-fig6.eq52_argument(1e-2) / PAPER_D:.3g}"),
    ("‖θ‖² = 2sd/λ = {} for λ = 10⁻⁴", _sci(fig2.onset_theta_sq(1e-4))),
    ("is ‖θ‖² ≥ {} there", _sci((2 * 7.6 / 1e-4) ** 2)),
    ("allows η ≤ {} at λ = 10⁻²", _sci(1e-2 / (4 * scale.table1_sigma_sq()))),
    ("{}·λd ({}·λd at 10⁻³)", (f"{trace_numbers.trace_over_lam_d('ptb', 'strong'):,.0f}",
                               f"{trace_numbers.trace_over_lam_d('ptb', 'middle'):,.0f}")),
    ("√(2d/M) ≈ {} at", f"{math.sqrt(2 * PAPER_D / PAPER_M):.0f}"),
])
def test_figures_md_quotes_the_codes_numbers(text, value):
    want = text.format(*value) if isinstance(value, tuple) else text.format(value)
    assert want in " ".join(FIGURES.split()), want


def test_bounds_md_quotes_the_codes_numbers():
    t = steps_required(c_ls_upper(1e-3, PAPER_D), 1e-4, 8.0, 0.01)
    assert f"T ≈ {t:.2g}".replace("e+", "e") in BOUNDS
    rho = 2e-4 / (1e-3 * c_ls_upper(1e-3, PAPER_D))
    assert f"ρ = 2η/C_LS(βF) ≈ {rho:.2g}".replace("e-", "e-") in BOUNDS


def test_the_docs_quote_no_run():
    for doc in (FIGURES, BOUNDS):
        assert "on the default" not in doc.split("## Where the paper")[-1] and "earlier version" not in doc
