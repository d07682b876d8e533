r"""The results a ledger reads, loaded once, and the helpers every claim module shares.

- measurements of every variant, each checkpoint marked ``collapsed`` (:mod:`villani.diagnostics.collapse`)
  and each run by its last checkpoint: ``run_collapsed`` (perplexity ≥ V/2) and ``run_learned``
  — its final validation perplexity is below the corpus's unigram model's
  (:func:`villani.diagnostics.collapse.beats_baseline`, ``stats.json`` ``baselines.unigram``);
  :meth:`Context.learned` drops the checkpoints of every run that did not learn and names them
  with both perplexities — no claim is decided on a run that does not beat the unigram model;
- the bounds rows, rays and landscapes;
- the paper-λ match (:func:`villani.plan.paper_lambda.match`) a claim is tested at;
- per-seed statistics: :meth:`Context.per_seed` computes a statistic on each seed's rows
  and gives the t interval over seeds (:func:`villani.statistics.intervals.seed_interval`, df = seeds − 1).
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np
import pandas as pd

from villani.claims.catalogue.registry import Measured
from villani.diagnostics.collapse import BASELINE_RULE, baseline_ppl, beats_baseline, is_collapsed
from villani.io.results import bounds_frame, data_stats, measurements, rays_table, vocabulary
from villani.io.tables import after_start
from villani.plan.paper_lambda import LambdaMatch, match
from villani.diagnostics.psi import psi_column
from villani.statistics.intervals import Interval, exact_value, seed_interval

__all__ = ["Context", "Where", "none", "run_codes", "after_start", "arithmetic", "not_a_result", "ANY_SCALE"]

#: Where an arithmetic row is "measured": the paper's own numbers.
ANY_SCALE = "the paper's own numbers (any scale)"


class Where(str):
    """A row's ``measured_on`` text that also carries the runs it used (``variant``, ``lams``):
    the power plan (:mod:`villani.claims.reporting.power`) reads the treatment between their λ extremes."""

    variant: str = ""
    lams: tuple[float, ...] = ()

    def __new__(cls, text: str, variant: str = "", lams=()):
        w = super().__new__(cls, text)
        w.variant, w.lams = variant, tuple(sorted({float(x) for x in lams if x is not None}))
        return w

    def __add__(self, other: str) -> "Where":
        return Where(str(self) + other, self.variant, self.lams)


def by_lam_text(df: pd.DataFrame, stat: Callable[[pd.DataFrame], float | None]) -> str:
    """``stat`` on each λ's rows (every seed's run at that λ): ``at λ = 0.012: 1.1, …``."""
    got = [(lam, stat(g)) for lam, g in df.groupby("lam")]
    return "at " + ", ".join(f"λ = {lam:g}: {fmt(v)}" for lam, v in got) + " (all seeds)" if got else ""


def theta_range_text(df: pd.DataFrame) -> str:
    """How far ‖θ‖ moves inside a run — the treatment a within-run exponent is estimated from:
    the range over runs of max ‖θ‖ / min ‖θ‖ among the rows."""
    f = df.groupby(["variant", "lam", "seed"])["theta_sq_norm"].agg(lambda x: float(np.sqrt(x.max() / x.min())))
    return f"‖θ‖ moves ×{f.min():.3g}–{f.max():.3g} inside a run" if len(f) else ""


def run_codes(df: pd.DataFrame) -> np.ndarray:
    """One integer per run (variant, λ, seed) of the rows."""
    return pd.factorize(df["variant"].astype(str) + "/" + df["lam"].astype(str) + "/" + df["seed"].astype(str))[0]


def arithmetic(value: float, how: str, note: str) -> Measured:
    """A number computed from the paper's inputs (:mod:`villani.claims.catalogue.paper`): the point interval
    [v, v] (:func:`villani.statistics.intervals.exact_value`) with ``how`` it was computed, and the row's note."""
    return Measured(exact_value(float(value), "arithmetic on the paper's numbers: " + how), ANY_SCALE, note)


def not_a_result(where: str, note: str) -> Measured:
    """A sentence of the paper that announces an experiment or a capability it never reports:
    no statistic, the verdict *not a result of the paper* (``where``: the paper's text that
    decides it; ``note``: what the paper says and does not)."""
    return Measured(None, f"the paper's text: {where}", note, reported=False)


def none(reason: str, where: str, *, match_: LambdaMatch | None = None, testable: bool = True,
         excluded: tuple[str, ...] = ()) -> Measured:
    """No statistic: the reason is the note."""
    return Measured(None, where, reason, match=match_, testable=testable, excluded=excluded)


class Context:
    """The results of one dataset (lazily loaded) and the ledger's settings."""

    def __init__(self, params: Mapping, root):
        self.params, self.root = params, root
        self.confidence = params.claims.confidence
        self.dataset = params.data.name
        self.s = params.measure.s_values[0]
        self.psi = psi_column(self.s)
        self._m: pd.DataFrame | None = None
        self._b: pd.DataFrame | None = None
        self._vocab: int | None = None
        self._baseline: float | None = None

    @property
    def vocab(self) -> int:
        if self._vocab is None:
            self._vocab = vocabulary(data_stats(self.params, self.root))[0]
        return self._vocab

    @property
    def baseline(self) -> float:
        """The corpus's unigram validation perplexity (one-line error when stats.json lacks it)."""
        if self._baseline is None:
            self._baseline = baseline_ppl(data_stats(self.params, self.root))
        return self._baseline

    @property
    def m(self) -> pd.DataFrame:
        """Every measured checkpoint of every variant, with ``collapsed``, ``run_collapsed`` and ``run_learned``."""
        if self._m is None:
            m = measurements(self.params, self.root, variants=None)
            m["collapsed"] = [bool(is_collapsed(p, lo, self.vocab)) for p, lo in zip(m["val_ppl"], m["val_loss"])]
            runs = m.sort_values("step").groupby(["variant", "lam", "seed"])
            m["run_collapsed"] = runs["collapsed"].transform("last").reindex(m.index).astype(bool)
            final = runs["val_ppl"].transform("last").reindex(m.index)
            m["run_learned"] = [beats_baseline(p, self.baseline) for p in final]
            self._m = m
        return self._m

    @property
    def b(self) -> pd.DataFrame:
        if self._b is None:
            self._b = bounds_frame(self.params, self.root)
        return self._b

    def rays(self) -> tuple[pd.DataFrame, dict] | None:
        try:
            return rays_table(self.params, self.root)
        except ValueError:
            return None

    def match(self, name: str, variant: str = "adamw") -> LambdaMatch:
        return match(self.params, name, variant)

    def learned(self, df: pd.DataFrame) -> tuple[pd.DataFrame, tuple[str, ...]]:
        """(rows of runs that beat the unigram baseline, the runs left out with their final
        perplexity and the baseline's)."""
        m = self.m
        key = ["variant", "lam", "seed"]
        bad = m[~m["run_learned"]].sort_values("step").groupby(key).tail(1)
        names = tuple(f"{r.variant} λ = {r.lam:g} seed {r.seed} (final val ppl {r.val_ppl:.4g} ≥ unigram "
                      f"{self.baseline:.4g})"
                      for r in bad.itertuples() if ((df["variant"] == r.variant) & (df["lam"] == r.lam)
                                                   & (df["seed"] == r.seed)).any())
        if not len(bad):
            return df, names
        drop = df.set_index(key).index.isin(bad.set_index(key).index)
        return df[~drop].reset_index(drop=True), names

    def rows(self, variant: str, lams) -> tuple[pd.DataFrame, tuple[str, ...]]:
        """The learned checkpoints of ``variant`` at the λ values ``lams`` (None entries ignored)."""
        lams = [float(x) for x in lams if x is not None]
        m = self.m[(self.m["variant"] == variant) & self.m["lam"].isin(lams)].reset_index(drop=True)
        return self.learned(m)

    def where(self, variant: str, lams, df: pd.DataFrame | None = None, extra: str = "") -> Where:
        """``dataset, variant, λ = …, seeds …, n checkpoints`` for a row's ``measured_on``."""
        lams = [float(x) for x in lams if x is not None]
        lam_text = ", ".join(f"{x:g}" for x in lams) or "none"
        seeds = sorted({int(x) for x in df["seed"]}) if df is not None and len(df) else self.params["train"]["seeds"]
        rows = f", {len(df)} checkpoints" if df is not None else ""
        return Where(f"{self.dataset}, {variant}, λ = {lam_text}, seeds {', '.join(map(str, seeds))}{rows}{extra}",
                     variant, lams)

    def per_seed(self, df: pd.DataFrame, stat: Callable[[pd.DataFrame], float | None], *,
                 scale: str = "linear") -> tuple[Interval, dict]:
        """``stat`` on each seed's rows (all its runs) and the t interval over seeds; ``scale="log"``
        for a positive statistic whose spread is multiplicative (a ratio, a CV): the t interval
        of the logs, back-transformed (:func:`villani.statistics.intervals.seed_interval`). A seed whose value
        is ≤ 0 leaves no log-scale interval (the method says which seed)."""
        values = {int(s): stat(g) for s, g in df.groupby("seed")}
        got = {s: v for s, v in values.items() if v is not None and np.isfinite(v)}
        bad = [s for s, v in got.items() if v <= 0]
        if scale == "log" and bad:
            iv = seed_interval(list(got.values()), self.confidence)
            return Interval(iv.estimate, None, None, iv.confidence, iv.n, iv.units, None,
                            f"{iv.method} — no interval: a log-scale interval needs values > 0, seed "
                            f"{', '.join(map(str, bad))} gives ≤ 0"), got
        return seed_interval(list(got.values()), self.confidence, scale=scale), got

    def seed_measured(self, df: pd.DataFrame, stat: Callable[[pd.DataFrame], float | None], where: str, *,
                      match: LambdaMatch | None, excluded: tuple[str, ...], scale: str = "linear") -> Measured:
        """:meth:`per_seed` as a claim's result: the t interval over seeds (on ``scale``), the
        per-seed values (on the log scale with :func:`modes_text`) and the runs left out in its
        note (a claim this scale cannot decide goes through :func:`villani.claims.catalogue.price.needs_scale`,
        which keeps the statistic)."""
        iv, vals = self.per_seed(df, stat, scale=scale)
        spread = modes_text(vals) if scale == "log" else ""
        return Measured(iv, where, join(per_seed_text(vals), spread, left_out_note(excluded)), match=match,
                        excluded=excluded)


def left_out_note(excluded: tuple[str, ...]) -> str:
    """The note's sentence about the runs left out (they do not beat the unigram baseline)."""
    return f"runs that did not learn left out (learned: {BASELINE_RULE}): " + "; ".join(excluded) if excluded else ""


def join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def fmt(x) -> str:
    return "n/a" if x is None or (isinstance(x, float) and not np.isfinite(x)) else f"{x:.3g}"


def per_seed_text(values: Mapping[int, float]) -> str:
    return "per seed " + ", ".join(f"{s}: {v:.3g}" for s, v in values.items()) if values else ""


#: Per-seed positive values whose largest and smallest differ by more than this factor are
#: described in the note (two seeds) or split at their widest gap (three or more: two modes).
SPREAD_FACTOR = 3.0


def modes_text(values: Mapping[int, float]) -> str:
    r"""What a mean over seeds hides when the seeds disagree by more than :data:`SPREAD_FACTOR`
    (positive values, compared on the log scale): with two seeds, their ratio; with three or
    more, the widest gap between consecutive sorted logs when it is over half their range —
    two modes, named by their seeds — else the range. Empty when the values agree (or any is ≤ 0).

    >>> modes_text({0: 1.0, 1: 1.2, 2: 9.0, 3: 10.0})
    'bimodal per-seed values: seeds 0, 1 at 1–1.2, seeds 2, 3 at 9–10 (a gap of ×7.5): a mean over seeds describes neither'
    """
    v = {s: x for s, x in values.items() if x is not None and np.isfinite(x)}
    if len(v) < 2 or min(v.values()) <= 0:
        return ""
    order = sorted(v, key=v.get)
    logs = np.log([v[s] for s in order])
    if logs[-1] - logs[0] <= np.log(SPREAD_FACTOR):
        return ""
    if len(v) == 2:
        return f"the two seeds differ ×{v[order[1]] / v[order[0]]:.3g} (seed {order[0]}: {v[order[0]]:.3g}, seed " \
               f"{order[1]}: {v[order[1]]:.3g})"
    gaps = np.diff(logs)
    k = int(np.argmax(gaps))
    if gaps[k] <= 0.5 * (logs[-1] - logs[0]):
        return f"per-seed values span ×{v[order[-1]] / v[order[0]]:.3g}"
    lo, hi = order[:k + 1], order[k + 1:]

    def group(ss):
        return f"seed{'s' if len(ss) > 1 else ''} {', '.join(map(str, sorted(ss)))} at " + (
            f"{v[ss[0]]:.3g}" if len(ss) == 1 else f"{v[ss[0]]:.3g}–{v[ss[-1]]:.3g}")
    return (f"bimodal per-seed values: {group(lo)}, {group(hi)} (a gap of ×{np.exp(gaps[k]):.2g}): a mean over "
            "seeds describes neither")


def from_units(units: list[tuple[str, Interval]], where: str, note: str = "", **kw) -> Measured:
    """A claim tested per unit: the row's interval is the hull of the units' (estimate: their
    median) and the verdict is per unit (:func:`villani.claims.catalogue.verdict.unit_verdict`)."""
    given = [iv for _, iv in units if iv.low is not None]
    if not units:
        return Measured(None, where, note or "no units", **kw)
    est = float(np.median([iv.estimate for _, iv in units]))
    lo = min(iv.low for iv in given) if len(given) == len(units) else None
    hi = max(iv.high for iv in given) if len(given) == len(units) else None
    first = units[0][1]
    hull = Interval(est, lo, hi, first.confidence, sum(iv.n for _, iv in units), len(units), None,
                    f"per unit ({len(units)}): {first.method}; the row's interval is their hull")
    text = ", ".join(f"{k}: {iv.estimate:.3g} [{fmt(iv.low)}, {fmt(iv.high)}]" for k, iv in units)
    return Measured(hull, where, join(text, note), units=tuple(units), **kw)


def scaled(iv: Interval, factor: float, what: str = "") -> Interval:
    """The interval of ``factor`` × the statistic (factor > 0)."""
    f = float(factor)
    if not f > 0:
        raise ValueError(f"scale factor must be > 0, got {factor}")
    s = (lambda v: None if v is None else v * f)
    return Interval(s(iv.estimate), s(iv.low), s(iv.high), iv.confidence, iv.n, iv.units, iv.dof,
                    iv.method + (f"; {what}" if what else ""))
