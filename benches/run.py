#!/usr/bin/env python3
"""Runs the whole eddy-benches suite on a shared machine and prints the result tables.

Each bench target compares eddy, tokio and smol on one workload in one process. Before each
target the script waits until the machine is quiet (other processes using < 0.1 core over
2 s); while the target runs it measures the CPU time used by *other* processes (all busy CPU
time from /proc/stat minus the bench's own), and reruns the target (up to --tries times) if
that exceeded --max-foreign cores on average. After each target, criterion's estimates of
its (last) run are copied to <target>/eddy-bench-runs/run<K>/<workload>/<runtime>.json.
With --runs N the whole suite is repeated N times, and the table gives, per cell, the median
over the runs and their range. Eddy-only targets (EDDY_ONLY, e.g. context_spawn) get their
own table, one column per benchmark id, with ratios against the first id.

Usage: benches/run.py [--runs N] [--tries N] [--max-foreign CORES] [workload ...]
                      [-- criterion args]
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

WORKLOADS = [
    "spawn_many_local",
    "spawn_many_remote",
    "yield_many",
    "ping_pong",
    "chained_spawn",
    "call_soon",
    "timers",
    "threadsafe",
]
# eddy-only targets: criterion group <name> with the benchmark ids listed here.
EDDY_ONLY = {"context_spawn": ["empty", "three_vars"]}
EXTRA = ["wake_latency", "memory"]
HZ = os.sysconf("SC_CLK_TCK")


def cpu_times():
    """(busy, steal) seconds of all CPUs since boot."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq) / HZ, steal / HZ


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def wait_quiet(limit_s=600, window_s=2.0, max_busy=0.1):
    start = time.time()
    while True:
        b0, _ = cpu_times()
        time.sleep(window_s)
        b1, _ = cpu_times()
        busy = (b1 - b0) / window_s
        if busy < max_busy:
            return busy
        if time.time() - start > limit_s:
            print(f"   (machine not quiet after {limit_s}s: {busy:.2f} cores busy; going on)")
            return busy
        print(f"   waiting for a quiet machine ({busy:.2f} cores busy by others)", flush=True)


def run_target(name, args, log):
    b0, s0 = cpu_times()
    c0 = children_cpu()
    t0 = time.time()
    cmd = ["cargo", "bench", "-q", "-p", "eddy-benches", "--bench", name]
    if args:
        cmd += ["--"] + args
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.time() - t0
    b1, s1 = cpu_times()
    own = children_cpu() - c0
    foreign = max(0.0, (b1 - b0) - own) / wall
    steal = (s1 - s0) / wall
    log.write(out.stdout)
    log.flush()
    return out.returncode, out.stdout, wall, own / wall, foreign, steal


def main():
    argv = sys.argv[1:]
    crit_args = []
    if "--" in argv:
        i = argv.index("--")
        argv, crit_args = argv[:i], argv[i + 1 :]
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--tries", type=int, default=3)
    p.add_argument("--max-foreign", type=float, default=0.15)
    p.add_argument("--log", help="raw output (default: <target>/eddy-bench-runs/<time>.log)")
    p.add_argument("targets", nargs="*")
    opts = p.parse_args(argv)
    targets = opts.targets or WORKLOADS + list(EDDY_ONLY) + EXTRA

    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    subprocess.run(["cargo", "bench", "-q", "-p", "eddy-benches", "--no-run"], check=True)
    target_dir = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--no-deps"],
            check=True,
            stdout=subprocess.PIPE,
        ).stdout
    )["target_directory"]

    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dirs = []
    extra_lines = []
    os.makedirs(os.path.join(target_dir, "eddy-bench-runs"), exist_ok=True)
    log_path = opts.log or os.path.join(target_dir, "eddy-bench-runs", stamp + ".log")
    print(f"raw output: {log_path}", flush=True)
    with open(log_path, "a") as log:
        for run in range(1, opts.runs + 1):
            run_dir = os.path.join(target_dir, "eddy-bench-runs", f"{stamp}-run{run}")
            run_dirs.append(run_dir)
            print(f"#### run {run} of {opts.runs} -> {run_dir}", flush=True)
            for name in targets:
                for attempt in range(1, opts.tries + 1):
                    idle = wait_quiet()
                    args = crit_args if name in WORKLOADS or name in EDDY_ONLY else []
                    rc, out, wall, own, foreign, steal = run_target(name, args, log)
                    print(
                        f"== {name} try {attempt}: rc {rc}, {wall:.0f} s, bench {own:.2f} cores, "
                        f"others {foreign:.2f} cores, steal {steal:.2f} (idle before: {idle:.2f})",
                        flush=True,
                    )
                    prev = ""
                    for line in out.splitlines():
                        if line.strip().startswith("time:"):
                            # criterion put a long benchmark name on a line of its own
                            line = prev.strip() + " " + line.strip()
                        if (
                            "time:" in line
                            or "SKIPPED" in line
                            or "panicked" in line
                            or line.startswith(("wake_latency/", "memory/"))
                        ):
                            print("   " + line.strip(), flush=True)
                        if line.strip():
                            prev = line
                    if rc == 0 and foreign <= opts.max_foreign:
                        break
                if name in WORKLOADS or name in EDDY_ONLY:
                    for rt in EDDY_ONLY.get(name, ("eddy", "tokio", "smol")):
                        src = os.path.join(target_dir, "criterion", name, rt, "new", "estimates.json")
                        if os.path.exists(src):
                            os.makedirs(os.path.join(run_dir, name), exist_ok=True)
                            shutil.copy(src, os.path.join(run_dir, name, rt + ".json"))
                else:
                    extra_lines += [
                        f"run {run}: {l}"
                        for l in out.splitlines()
                        if l.startswith((name + "/"))
                    ]

    workloads = [t for t in targets if t in WORKLOADS]
    if workloads:
        print()
        subprocess.run([sys.executable, "benches/table.py"] + run_dirs + ["--"] + workloads)
    for name in (t for t in targets if t in EDDY_ONLY):
        print()
        subprocess.run(
            [sys.executable, "benches/table.py", "--ids", ",".join(EDDY_ONLY[name])]
            + run_dirs
            + ["--", name]
        )
    if extra_lines:
        print()
        print("\n".join(extra_lines))


if __name__ == "__main__":
    main()
