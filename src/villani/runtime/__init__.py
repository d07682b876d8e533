"""How a long job behaves while it runs: progress lines and a bar (:mod:`.progress`), the
graceful stop on SIGTERM/SIGUSR1 (:mod:`.stop`)."""
