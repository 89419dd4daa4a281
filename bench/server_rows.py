#!/usr/bin/env python3
"""One result of bench/server.sh: appends its JSON line to RESULTS and prints its table row.

  server_rows.py popkit RESULTS LABEL R MICRO ACC FLAGS RUN_JSON
  server_rows.py torch RESULTS LABEL TORCH_JSON...   (the better of the runs given)
popkit's figures come from the run file: throughput.median, the median step after warm-up,
and the step's seconds by kind summed over the phases (run.json's measured_seconds_by_kind);
what they do not account for is 'other'.
"""
import json
import os
import statistics
import sys


def popkit(results, label, r, mb, acc, flags, path):
    d = json.load(open(path))
    steps = d["step_seconds"][d["throughput"]["warmup_steps"]:]
    by_kind = {}
    for phase in d["phases"]:
        for kind, seconds in phase["measured_seconds_by_kind"].items():
            by_kind[kind] = by_kind.get(kind, 0.0) + seconds
    step = statistics.median(steps)
    row = {"tool": "popkit", "label": label, "replicas": int(r), "micro_batch": int(mb),
           "accumulation": int(acc), "flags": flags.strip(),
           "samples_per_second": d["throughput"]["median"], "step_seconds": step,
           "seconds_by_kind": by_kind, "unaccounted_seconds": step - sum(by_kind.values()),
           "threads": d["environment"]["n_threads"], "kernels": d["environment"]["kernels"]}
    parts = " ".join(f"{k} {1e3 * s:.2f}" for k, s in sorted(by_kind.items()))
    other = 1e3 * row["unaccounted_seconds"]
    return row, (f"| {label} | {row['samples_per_second']:,.0f} | {1e3 * step:.2f} ms: {parts}, "
                 f"other {other:.2f} | {row['threads']} |")


def torch(results, label, *paths):
    runs = [json.load(open(p)) for p in paths if os.path.exists(p) and os.path.getsize(p)]
    if not runs:
        return None, f"| {label} | failed | | |"
    best = max(runs, key=lambda d: d["samples_per_second"]["median"])
    best["label"] = label
    best["policies"] = {d["OMP_WAIT_POLICY"]: d["samples_per_second"]["median"] for d in runs}
    policies = ", ".join(f"{k} {v:,.0f}" for k, v in best["policies"].items())
    return best, (f"| {label} | {best['samples_per_second']['median']:,.0f} | "
                  f"PyTorch {best['version']} plain ({policies}) | {best['threads']} |")


def main():
    verb, results = sys.argv[1], sys.argv[2]
    row, line = {"popkit": popkit, "torch": torch}[verb](results, *sys.argv[3:])
    if row is not None:
        with open(results, "a") as f:
            f.write(json.dumps(row) + "\n")
    print(line)


if __name__ == "__main__":
    main()
