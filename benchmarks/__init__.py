"""Side-by-side benchmarks: the same Ray scripts under real Ray and under rayreact.

``python -m benchmarks`` (or ``rayreact bench``) runs every workload of
shared/BENCHMARKS.md once per backend, each in a fresh process, and writes a
Markdown table, JSON and PNG charts to ``benchmarks/results/``. See
``python -m benchmarks --help``.
"""
