"""Bar charts of the speedups over Ray (PNG, matplotlib's Agg backend: no display needed)."""

from __future__ import annotations

import os
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from benchmarks.backends import RAYREACT, RAYREACT_COLOCATED, RAYREACT_NO_REACTOR  # noqa: E402

SERIES = [(RAYREACT, "#1f77b4"), (RAYREACT_NO_REACTOR, "#aec7e8"), (RAYREACT_COLOCATED, "#2ca02c")]


def _speedup_chart(title, labels, series, targets, path):
    """Horizontal grouped bars, log scale; Ray is the line at 1x, targets are red ticks."""
    height = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.55 * len(labels) * len(series)))
    for k, (label, color, values) in enumerate(series):
        positions = [i + (k - (len(series) - 1) / 2) * height for i in range(len(labels))]
        bars = [v if v else 0 for v in values]
        ax.barh(positions, bars, height=height, color=color, label=label)
        for y, v in zip(positions, values):
            if v:
                ax.text(v, y, f" {v:.2f}×", va="center", fontsize=8)
    for i, target in enumerate(targets):
        if target:
            ax.plot([target, target], [i - 0.45, i + 0.45], color="red", linewidth=2,
                    label="target" if i == next(j for j, t in enumerate(targets) if t) else None)
    ax.axvline(1.0, color="black", linewidth=1, label="Ray = 1×")
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("speedup over Ray (log scale; > 1 is faster)")
    ax.set_title(textwrap.fill(title, 80), fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_plots(results, out_dir):
    """One chart per workload plus a summary; returns the file names written."""
    same_columns = not results["reactor_available"]
    written = []
    headline = []
    for w in results["workloads"]:
        rows = [r for r in w["metrics"] if r["speedup"].get(RAYREACT.name)]
        if not rows:
            continue
        series = []
        for backend, color in SERIES:
            if same_columns and backend is RAYREACT_NO_REACTOR:
                continue
            series.append((backend.label, color, [r["speedup"].get(backend.name) for r in rows]))
        name = f"{w['name']}.png"
        _speedup_chart(f"{w['name']}: {w['description']}", [r["name"] for r in rows], series,
                       [r["target_speedup"] for r in rows], os.path.join(out_dir, name))
        written.append(name)
        main = next((r for r in rows if r["target_speedup"]), rows[0])
        headline.append((f"{w['name']}: {main['name']}", main))
    if headline:
        series = []
        for backend, color in SERIES:
            if same_columns and backend is RAYREACT_NO_REACTOR:
                continue
            series.append((backend.label, color, [r["speedup"].get(backend.name) for _, r in headline]))
        _speedup_chart("rayreact vs Ray, headline figure per workload", [label for label, _ in headline], series,
                       [r["target_speedup"] for _, r in headline], os.path.join(out_dir, "summary.png"))
        written.insert(0, "summary.png")
    return written
