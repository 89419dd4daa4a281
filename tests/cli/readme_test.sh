#!/usr/bin/env bash
# Every command README shows runs as shown. Each ```-block whose first line is
# `$ COMMAND` is a transcript: its `$ ` lines are commands, run in README's order in one
# scratch folder (with examples/ and bench/ linked in, so paths read as in README), and the lines
# under each are what it prints (stdout and stderr together). A transcript without a
# "..." line must be the whole output; one with "..." lines quotes an excerpt: its other
# lines must appear in the output, in that order (a "..." may be indented, as in a list). `$ echo $?` and the line after it
# give the exit code; without them it must be 0.
#
# Run: popplan, poprun, popreport, mpirun (when poprun has MPI) and head/tail of the
# files the runs wrote. Not run, and printed as such: build and bench commands (cmake,
# chrt, build/<preset>/...), whose figures README gives as measured on its machine.
# What differs from run to run is masked on both sides before comparing: times, rates
# and the run folders' stamps (times and rates of metrics.jsonl lines too); losses,
# accuracies, memory and every message are compared as written. README's figures are
# of the x86-64-v4 kernels: on a CPU whose kernels differ, float rounding changes the
# trained figures, so the numbers of lines that differ are masked too (and it says so).
set -uo pipefail
. "$POPKIT_SOURCE_DIR/tests/cli/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 # mpirun as root
# Sanitized builds: OpenMPI's own allocations are reported as leaks at exit (the other
# tests keep leak detection).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ln -s "$POPKIT_SOURCE_DIR/examples" "$work/examples"
ln -s "$POPKIT_SOURCE_DIR/bench" "$work/bench"
level=$(poprun --version | sed -n 's/^kernels \([^ ]*\) .*/\1/p')
mpi=0
poprun --version | grep -q "MPI built in" && command -v mpirun >/dev/null && mpi=1
cd "$work" || exit 1
/usr/bin/python3 - "$POPKIT_SOURCE_DIR/README.md" "$level" "$mpi" "${POPKIT_SANITIZE:-}" <<'PY'
import json, re, subprocess, sys

readme, level, mpi, sanitize = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4]
text = open(readme, encoding="utf-8").read()
RUN = {"popplan", "poprun", "popreport", "head", "tail"} | ({"mpirun"} if mpi else set())
NOT_RUN = {"cmake", "chrt", "bash"}
# A sanitized build compiles the kernels with other flags, and its float rounding differs
# like another level's.
rounding = level != "x86-64-v4" or sanitize != ""
if rounding:
    print(f"kernels {level}{', sanitized (' + sanitize + ')' if sanitize else ''}: README's "
          "trained figures are of an unsanitized x86-64-v4 build; numbers are masked on lines "
          "that differ")

TIMES = [
    (re.compile(r"\b\d{8}-\d{6}(-\d+)?\b"), "<stamp>"),
    (re.compile(r"\d\d:\d\d<\d\d:\d\d"), "<elapsed>"),
    (re.compile(r"[\d,]+(\.\d+)? (s|ms|µs|steps/s|samples/s)\b"), "<time>"),
    (re.compile(r"min [\d,]+, max [\d,]+"), "min <rate>, max <rate>"),
]
NUMBER = re.compile(r"\d[\d,]*(\.\d+)?")


def mask(line):
    try:  # a metrics.jsonl line: its times and rates vary
        row = json.loads(line)
    except ValueError:
        row = None
    if isinstance(row, dict) and "step_seconds" in row:
        row["step_seconds"] = row["samples_per_second"] = None
        row["phase_seconds"] = {k: None for k in row.get("phase_seconds", {})}
        return json.dumps(row, sort_keys=True)
    for pattern, by in TIMES:
        line = pattern.sub(by, line)
    return line


def same(want, got):
    if want == got:
        return True
    return rounding and NUMBER.sub("<n>", want) == NUMBER.sub("<n>", got)


def transcripts():
    for block in re.findall(r"^```[a-z]*\n(\$ .*?)^```", text, re.S | re.M):
        steps, current = [], None
        for line in block.rstrip("\n").split("\n"):
            if line.startswith("$ ") and line != "$ echo $?":
                current = {"command": line[2:], "lines": [], "rc": 0}
                steps.append(current)
            else:
                current["lines"].append(line)
        for step in steps:
            lines = step["lines"]
            if len(lines) >= 2 and lines[-2] == "$ echo $?":
                step["rc"] = int(lines[-1])
                del lines[-2:]
            step["excerpt"] = any(line.strip() == "..." for line in lines)
        yield steps


failures, ran, skipped = 0, 0, []
for steps in transcripts():
    for step in steps:
        command = step["command"]
        words = command.split()
        if words[0] not in RUN:
            if words[0] not in NOT_RUN and not words[0].startswith("build/") and words[0] != "mpirun":
                print(f"FAIL: README shows '{command}', which this test neither runs nor lists as not run")
                failures += 1
            skipped.append(command)
            continue
        ran += 1
        done = subprocess.run(command, shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=600)
        got = [mask(line) for line in done.stdout.rstrip("\n").split("\n")]
        want = [mask(line) for line in step["lines"]]
        problem = None
        if done.returncode != step["rc"]:
            problem = f"exited {done.returncode}, README says {step['rc']}"
        elif not step["excerpt"]:
            if len(want) != len(got) or not all(same(w, g) for w, g in zip(want, got)):
                problem = "its output differs from README's"
        else:
            at = 0
            for w in (w for w in want if w.strip() != "..."):
                while at < len(got) and not same(w, got[at]):
                    at += 1
                if at == len(got):
                    problem = f"README's line is not in its output (in order):\n  {w}"
                    break
                at += 1
        if problem:
            failures += 1
            print(f"FAIL: '{command}': {problem}\n--- README\n" + "\n".join(step["lines"]) +
                  "\n--- actual\n" + done.stdout)
print(f"ran {ran} commands of README; not run: " + "; ".join(skipped))
if ran < 13:  # the transcripts README holds today
    print(f"FAIL: only {ran} commands found in README's transcripts")
    failures += 1
sys.exit(1 if failures else 0)
PY
[ $? = 0 ] || fail "README's commands: see above"
finish readme
