#!/usr/bin/env python3
"""Prints a markdown table of criterion's median times for eddy, tokio and smol.

Usage: table.py [--ids A,B,...] RUN_DIR... -- WORKLOAD...

With --ids, the columns are those benchmark ids instead of the three runtimes (for eddy-only
targets such as `context_spawn`: `--ids empty,three_vars`), and the ratio column compares
each id with the first.

Each RUN_DIR holds one run of the suite as RUN_DIR/<workload>/<runtime>.json (criterion's
estimates.json, copied by run.py) or criterion's own layout
RUN_DIR/<workload>/<runtime>/new/estimates.json (pass target/criterion for the last run).

With one run, a cell is that run's median time per iteration with its median absolute
deviation. With several runs, a cell is the median of the runs' medians followed by the
range [lowest, highest]; the ratio columns are the median of the per-run ratios (each ratio
compares two runtimes measured in the same process run) followed by their range.
"""

import json
import os
import statistics
import sys

RUNTIMES = ["eddy", "tokio", "smol"]


def fmt_time(ns):
    if ns >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.1f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f} us"
    return f"{ns:.0f} ns"


def load(run_dir, workload, runtime):
    for path in (
        os.path.join(run_dir, workload, runtime + ".json"),
        os.path.join(run_dir, workload, runtime, "new", "estimates.json"),
    ):
        if os.path.exists(path):
            with open(path) as f:
                est = json.load(f)
            return est["median"]["point_estimate"], est["median_abs_dev"]["point_estimate"]
    return None


def time_cell(got, many):
    """A time cell: one run's median (± its MAD), or the median of the runs' medians [range]."""
    if not got:
        return "n/a"
    if not many:
        median, mad = got[0]
        return f"{fmt_time(median)} (±{100 * mad / median:.0f}%)"
    meds = [m for m, _ in got]
    return (
        f"{fmt_time(statistics.median(meds))} "
        f"[{fmt_time(min(meds))}–{fmt_time(max(meds))}]"
    )


def ratio_cell(ratios, many, digits, list_runs=False):
    """A ratio cell: one run's ratio, or the median of the per-run ratios [range]."""
    if not ratios:
        return "n/a"
    if not many:
        return f"{ratios[0]:.{digits}f}"
    cell = (
        f"**{statistics.median(ratios):.{digits}f}** "
        f"[{min(ratios):.{digits}f}–{max(ratios):.{digits}f}]"
    )
    if list_runs:
        cell += f" (runs: {' / '.join(f'{r:.{digits}f}' for r in ratios)})"
    return cell


def ratios_of(per_run, num, den):
    """Per-run ratios num/den, for the runs that measured both."""
    return [
        run[num][0] / run[den][0]
        for run in per_run
        if run[num] is not None and run[den] is not None
    ]


def main():
    args = sys.argv[1:]
    ids = RUNTIMES
    if args and args[0] == "--ids":
        ids = args[1].split(",")
        args = args[2:]
    split = args.index("--")
    runs, workloads = args[:split], args[split + 1 :]
    many = len(runs) > 1
    if ids is not RUNTIMES:
        return table_ids(runs, workloads, ids, many)
    print(f"| workload | eddy | tokio | smol | eddy/tokio | eddy/smol |")
    print("|---|---:|---:|---:|---:|---:|")
    for w in workloads:
        per_run = [{rt: load(r, w, rt) for rt in RUNTIMES} for r in runs]
        cells = [
            time_cell([run[rt] for run in per_run if run[rt] is not None], many)
            for rt in RUNTIMES
        ]
        for other in ("tokio", "smol"):
            cells.append(ratio_cell(ratios_of(per_run, "eddy", other), many, 2))
        print(f"| {w} | " + " | ".join(cells) + " |")


def table_ids(runs, workloads, ids, many):
    """One row per workload, one column per benchmark id, ratios against the first id."""
    base = ids[0]
    head = ids + [f"{i}/{base}" for i in ids[1:]]
    print("| workload | " + " | ".join(head) + " |")
    print("|---|" + "---:|" * len(head))
    for w in workloads:
        per_run = [{i: load(r, w, i) for i in ids} for r in runs]
        cells = [
            time_cell([run[i] for run in per_run if run[i] is not None], many) for i in ids
        ]
        for i in ids[1:]:
            cells.append(ratio_cell(ratios_of(per_run, i, base), many, 3, list_runs=True))
        print(f"| {w} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
