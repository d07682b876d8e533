"""Progress reporting: heartbeat lines while a step blocks, throttling, the bar only on a terminal,
the engine's callbacks (which must not change any estimate), and logging configuration."""

from __future__ import annotations

import io
import logging
import re
import sys
import time

import numpy as np
import pytest
import torch

from villani.runtime import progress as progress_mod
from villani.curvature import hutchinson, lanczos, slq, top_eigenvalues
from villani.runtime.progress import Progress, configure_logging, format_seconds, running_trace

LOGGER = "villani.test_progress"


@pytest.fixture()
def lines(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    return lambda: [r for r in caplog.records if r.name == LOGGER]


def test_heartbeat_lines_come_while_a_step_blocks(lines):
    """One unit that takes 1.3 s with a 0.2 s interval: lines keep coming during it, never
    more than ~one interval apart, and they carry the last reported values."""
    p = Progress("job", 4, unit="HVP", logger=logging.getLogger(LOGGER), interval_s=0.2, bar=False)
    p.update(1, trace=12.5)
    time.sleep(1.3)  # a long HVP: no update meanwhile
    p.close()
    recs = lines()
    during = [r for r in recs if "HVP 1/4" in r.getMessage() and "done" not in r.getMessage()]
    assert len(during) >= 4, [r.getMessage() for r in recs]
    gaps = np.diff([r.created for r in during])
    assert gaps.max() < 0.2 + 0.25, gaps
    assert all("trace=12.5" in r.getMessage() for r in during)
    assert "done" in recs[-1].getMessage() and "HVP 1/4" in recs[-1].getMessage()


def test_fast_updates_are_throttled_and_line_has_rate_and_eta(lines):
    p = Progress("train x", 1000, unit="step", logger=logging.getLogger(LOGGER), interval_s=30, bar=False)
    for i in range(1, 501):
        p.update(i, loss=1.0 / i)
    line = p.line()
    p.close()
    assert len(lines()) == 2  # the start line and the last one, not 500
    assert re.search(r"step 500/1000 \(50%\) \| [0-9.e-]+ s/step \| loss=0\.002 \| elapsed 0:00:\d\d \| ETA 0:\d\d:\d\d",
                     line), line


def test_phases_reset_values_and_eta_uses_the_phase_rate(lines):
    p = Progress("measure", 10, unit="HVP", logger=logging.getLogger(LOGGER), interval_s=30, bar=False)
    p.phase("validation")
    assert p.eta() is None and "ETA ?" in p.line()
    p.phase("hutchinson")
    time.sleep(0.2)
    p.update(4, trace=3.0)
    assert p.seconds_per_unit() == pytest.approx(0.05, rel=0.5)
    assert p.eta() == pytest.approx(6 * p.seconds_per_unit(), rel=0.05)
    p.phase("lanczos")
    assert "trace" not in p.line()  # values belong to their phase
    assert p.seconds_per_unit() is not None  # the previous phase's rate until this one's first unit
    p.close()
    msgs = [r.getMessage() for r in lines()]
    assert [m.split(" | ")[1] for m in msgs[1:]] == ["validation", "hutchinson", "lanczos", "done"]


def test_bar_only_on_a_terminal(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self):
            return True

    for stream, drawn in ((io.StringIO(), False), (Tty(), True)):
        monkeypatch.setattr(sys, "stderr", stream)
        with Progress("job", 3, logger=logging.getLogger(LOGGER), interval_s=30) as p:
            p.update(3)
        assert ("0/3 [" in stream.getvalue()) is drawn, stream.getvalue()  # tqdm drew its bar


def test_log_lines_go_above_a_drawn_bar_through_tqdm_write(monkeypatch):
    """While a bar is drawn, tqdm's logging_redirect_tqdm sends the console handler's lines
    through ``tqdm.write`` (the bar is cleared and redrawn below the line); afterwards the
    handlers are as configured. Without a bar nothing is redirected."""
    import tqdm as tqdm_pkg

    class Tty(io.StringIO):
        def isatty(self):
            return True

    written = []
    original = tqdm_pkg.tqdm.write.__func__
    monkeypatch.setattr(tqdm_pkg.tqdm, "write", classmethod(lambda cls, s, **kw: (written.append(s),
                                                                                  original(cls, s, **kw))))
    stream = Tty()
    monkeypatch.setattr(sys, "stderr", stream)
    root = logging.getLogger()
    before = list(root.handlers)
    try:
        configure_logging("INFO", "30")
        configured = list(root.handlers)
        for bar in (True, False):
            written.clear()
            with Progress("job", 3, logger=logging.getLogger(LOGGER), bar=bar) as p:
                p.phase("work")
                redirected = [h for h in root.handlers if h not in configured]
            assert bool(redirected) is bar and root.handlers == configured
            assert any("job | work | step 0/3" in w for w in written) is bar, written
        assert "job | work | step 0/3" in stream.getvalue() and "0/3 [" in stream.getvalue()
    finally:
        root.handlers = before
        progress_mod._configured_interval = None
        logging.getLogger("villani").setLevel(logging.NOTSET)


def test_no_thread_when_info_is_off():
    logging.getLogger("villani.silent").setLevel(logging.WARNING)
    p = Progress("job", 3, logger=logging.getLogger("villani.silent"), interval_s=0.01, bar=False)
    assert p._thread is None
    p.close()


def _op():
    g = torch.Generator().manual_seed(0)
    A = torch.randn(40, 40, generator=g, dtype=torch.float64)
    return A + A.T


def test_engine_callbacks_report_and_change_nothing():
    A = _op()
    seen = []
    with_cb = hutchinson(A, 7, seed=3, batch_size=2, callback=lambda d, t, x: seen.append((d, t, x.copy())))
    plain = hutchinson(A, 7, seed=3, batch_size=2)
    assert [(d, t) for d, t, _ in seen] == [(2, 7), (4, 7), (6, 7), (7, 7)]
    np.testing.assert_array_equal(seen[-1][2], plain.samples)
    np.testing.assert_array_equal(with_cb.samples, plain.samples)
    assert running_trace(7, 7, seen[-1][2])["trace"] == pytest.approx(plain.mean)

    steps = []
    top = top_eigenvalues(A, 3, num_steps=12, seed=1, callback=lambda d, t, v: steps.append((d, t, v)))
    assert [d for d, _, _ in steps] == list(range(1, 13)) and {t for _, t, _ in steps} == {12}
    assert steps[-1][2] == pytest.approx(top.values[0])
    np.testing.assert_array_equal(top.values, top_eigenvalues(A, 3, num_steps=12, seed=1).values)

    done = []
    dens = slq(A, 3, 5, seed=1, first=top.lanczos, callback=lambda d, t, tr: done.append((d, t, len(tr))))
    assert [(d, t) for d, t, _ in done] == [(i, 10) for i in range(1, 11)]
    assert done[0][2] == 1 and done[-1][2] == 2  # trace samples of the finished starts
    assert dens.num_matvecs == 10
    res = lanczos(A, 6, seed=2)
    np.testing.assert_array_equal(res.alphas, lanczos(A, 6, seed=2, callback=lambda *a: None).alphas)


def test_format_seconds():
    assert format_seconds(3725.4) == "1:02:05"
    assert format_seconds(None) == "?" and format_seconds(float("inf")) == "?"


def test_configure_logging_levels_interval_and_bad_values(monkeypatch):
    root = logging.getLogger()
    before = list(root.handlers)
    try:
        monkeypatch.setenv(progress_mod.ENV_INTERVAL, "2.5")
        configure_logging("debug")
        configure_logging("DEBUG")
        ours = [h for h in root.handlers if isinstance(h, progress_mod._StderrHandler)]
        assert len(ours) == 1
        assert progress_mod.progress_interval() == 2.5
        assert logging.getLogger("villani").level == logging.DEBUG
        assert logging.getLogger("urllib3").getEffectiveLevel() == logging.WARNING
        configure_logging("INFO", "0.5")
        assert progress_mod.progress_interval() == 0.5
        with pytest.raises(ValueError, match=r"^--log-level: 'loud' is not a log level \(allowed: DEBUG, INFO"):
            configure_logging("loud")
        monkeypatch.setenv(progress_mod.ENV_INTERVAL, "soon")
        with pytest.raises(ValueError, match=r"^VILLANI_PROGRESS_INTERVAL: 'soon' is not a number of seconds > 0$"):
            configure_logging(None)
    finally:
        for h in list(root.handlers):
            if h not in before:
                root.removeHandler(h)
        progress_mod._configured_interval = None
        logging.getLogger("villani").setLevel(logging.NOTSET)


def test_cli_bad_interval_is_one_line(capsys):
    from villani.cli import main

    assert main(["validate", "--progress-interval", "-1"]) == 2
    assert capsys.readouterr().err.strip() == "villani: error: --progress-interval: '-1' is not a number of seconds > 0"
