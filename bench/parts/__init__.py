"""The report side of ``bench/run.py``'s parts, one module per subject: each runs its part's workers (the
modules of ``bench/`` beside this package) in throwaway databases and adds the part's tables and goals to the
report (``bench/report.py``). Nothing here sets Django up: the parent process only starts workers."""
