"""The catalogue of claims: every quantitative claim of the paper, declared next to its
computation (:mod:`.registry`), with the verdict rule (:mod:`.verdict`), the results a
ledger reads (:mod:`.context`), the paper's own numbers (:mod:`.paper`), the premises
(:mod:`.premises`, :mod:`.derivation`), one module per figure or table (:mod:`.fig2` …
:mod:`.fig8`, :mod:`.noise`, :mod:`.table3`, :mod:`.trace_numbers`, :mod:`.scale`) and
what they share (:mod:`.pooled`, :mod:`.price`)."""
