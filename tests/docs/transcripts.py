#!/usr/bin/python3
"""Runs the command transcripts of a Markdown page and compares what they print.

A transcript is a ```-block whose first line is `$ COMMAND`: its `$ ` lines are
commands, run in the page's order in one scratch folder of its own (with examples/,
bench/, schemas/ and share/ linked in, so paths read as from the repository's root), and
the lines under each are what it prints (stdout and stderr together). A transcript
without a "..." line must be the whole output; one with "..." lines quotes an excerpt:
its other lines must appear in the output, in that order (a "..." may be indented, as in
a list). `$ echo $?` and the line after it give the exit code; without them it must be 0.

Run: popplan, poprun, popreport, mpirun (when poprun has MPI; without it, the rest of
that transcript is not run either) and a few plain shell tools over the files the runs
wrote. Not run, and listed as such: build and bench
commands (cmake, chrt, bash, build/<preset>/...), whose figures a page gives as measured
on its machine. What differs from run to run is masked on both sides before comparing:
the run folders' stamps, and the times and rates of every command but popplan's (which
prices plans, deterministically) and of every command of a block whose fence reads
```console measured (a plan priced with a profile that `poprun calibrate` measured);
popplan's estimates, losses, accuracies, memory and every message are compared as
written. The pages'
figures are of the x86-64-v4 kernels: on a CPU whose kernels differ, float rounding
changes the trained figures, so the numbers of lines that differ are masked too, and
in a block whose fence reads ```console trained (text a trained model generated, which
every rounding changes) a line that differs is masked whole.

An image the page shows, `![...](images/NAME.svg)`, must be drawn by one of its
transcripts: the command writes NAME.svg into the scratch folder, and the file must
equal the committed one byte for byte.

  transcripts.py check PAGE...    fail (exit 1) naming PAGE:LINE of every difference
  transcripts.py update PAGE...   rewrite each page's outputs and images from this build
  --exact (after the verb)         compare numbers as written on any build and CPU level

`update` is a golden-file update: a whole output is replaced (lines equal after masking
keep their text, so times do not churn); an excerpt keeps its "..." lines and each quoted
line takes the output line it matches, or failing that the most similar one after the
line before; exit codes are rewritten. Review the diff.
"""
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

RUN = {"popplan", "poprun", "popreport", "head", "tail", "cat", "grep", "ls", "for", "diff",
       "cmp", "wc"}
NOT_RUN = {"cmake", "chrt", "bash"}
LINKED = ["examples", "bench", "schemas", "share"]
# A command's limit; a sanitized build runs several times slower, and its limit is 5
# times this, as ctest's are (cmake/PopkitTest.cmake).
COMMAND_TIMEOUT = 600
SANITIZED_SCALE = 5

STAMP = (re.compile(r"\b\d{8}-\d{6}(-\d+)?\b"), "<stamp>")
TIMES = [
    (re.compile(r"\d\d:\d\d<\d\d:\d\d"), "<elapsed>"),
    (re.compile(r"[\d,]+(\.\d+)? (s|ms|µs|us|steps/s|samples/s)\b"), "<time>"),
    (re.compile(r"min [\d,]+, max [\d,]+"), "min <rate>, max <rate>"),
]
NUMBER = re.compile(r"\d[\d,]*(\.\d+)?")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+\.svg)\)")


def measures(command):
    """Whether a command's output holds measured times: anything but popplan's plans."""
    words = set(re.split(r"[\s;|&()]+", command))
    return "popplan" not in words or bool(words & {"poprun", "mpirun", "popreport"}) or \
        "runs/" in command


def mask(line, measured):
    """`line` with what differs from run to run replaced: stamps, and times and rates
    when it is `measured`."""
    line = STAMP[0].sub(STAMP[1], line)
    if not measured:
        return line
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


class Page:
    """A Markdown page's transcripts: each step is one `$ ` command with the page's
    line numbers (0-based indices into `lines`) of what it shows."""

    def __init__(self, path):
        self.path = path
        self.lines = open(path, encoding="utf-8").read().split("\n")
        self.blocks = []  # (first, end, measured, trained): the lines inside a fence
        self.problems = []
        fence = None
        for i, line in enumerate(self.lines):
            if fence is None and line.startswith("```"):
                fence = i
            elif fence is not None and line.startswith("```"):
                first, end = fence + 1, i
                inside = self.lines[first:end]
                if inside and inside[0].startswith("$ "):
                    words = self.lines[fence][3:].split()
                    self.blocks.append((first, end, "measured" in words, "trained" in words))
                elif any(x.startswith("$ ") for x in inside):
                    self.problems.append(
                        (first + 1, "a block with '$ ' lines must start with one to be a "
                         "transcript (this one would not be run)"))
                fence = None

    def steps(self, block):
        first, end, measured, trained = block
        steps = []
        for i in range(first, end):
            line = self.lines[i]
            if line.startswith("$ ") and line != "$ echo $?":
                steps.append({"command": line[2:], "at": i, "out": [], "rc": 0, "rc_at": None,
                              "measured": measured or measures(line[2:]), "trained": trained})
            else:
                steps[-1]["out"].append(i)
        for step in steps:
            out = step["out"]
            if len(out) >= 2 and self.lines[out[-2]] == "$ echo $?":
                step["rc"] = int(self.lines[out[-1]])
                step["rc_at"] = out[-2]
                del out[-2:]
            step["excerpt"] = any(self.lines[i].strip() == "..." for i in out)
        return steps

    def images(self):
        here = os.path.dirname(os.path.abspath(self.path))
        for i, line in enumerate(self.lines):
            for ref in IMAGE.findall(line):
                if "://" not in ref:
                    yield i, os.path.normpath(os.path.join(here, ref))


class Runner:
    def __init__(self, source_dir, exact):
        self.source_dir = source_dir
        version = subprocess.run(["poprun", "--version"], stdout=subprocess.PIPE, text=True).stdout
        found = re.search(r"^kernels (\S+)", version, re.M)
        level = found.group(1) if found else "unknown"
        self.mpi = "MPI built in" in version and shutil.which("mpirun") is not None
        sanitize = os.environ.get("POPKIT_SANITIZE", "")
        self.timeout = COMMAND_TIMEOUT * (SANITIZED_SCALE if sanitize else 1)
        # A sanitized build compiles the kernels with other flags, and its float rounding
        # differs like another level's.
        self.rounding = not exact and (level != "x86-64-v4" or sanitize != "")
        self.note = None
        if self.rounding:
            self.note = (f"kernels {level}{', sanitized (' + sanitize + ')' if sanitize else ''}: "
                         "the pages' trained figures are of an unsanitized x86-64-v4 build; "
                         "numbers are masked on lines that differ")
        self.env = dict(os.environ)
        self.env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        self.env["LC_ALL"] = "C.UTF-8"  # `ls` sorts, and tools print, alike on every machine

    def runs(self, command):
        word = command.split()[0]
        return word in RUN or (word == "mpirun" and self.mpi)

    def listed(self, command):
        word = command.split()[0]
        return word in NOT_RUN or word.startswith("build/") or word == "mpirun"

    def execute(self, command, cwd):
        done = subprocess.run(command, shell=True, executable="/bin/bash", cwd=cwd, env=self.env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=self.timeout)
        out = done.stdout.rstrip("\n")
        return done.returncode, (out.split("\n") if out else [])


class Lines:
    """Compares a step's output with the page's lines, masked as the step needs."""

    def __init__(self, runner, measured, trained):
        self.rounding = runner.rounding
        self.measured = measured
        self.trained = trained

    def mask(self, line):
        return mask(line, self.measured)

    def same(self, want, got):
        want, got = self.mask(want), self.mask(got)
        if want == got:
            return True
        if not self.rounding:
            return False
        return self.trained or NUMBER.sub("<n>", want) == NUMBER.sub("<n>", got)

    def opcodes(self, want, got):
        matcher = difflib.SequenceMatcher(None, [self.mask(w) for w in want],
                                          [self.mask(g) for g in got], autojunk=False)
        return matcher.get_opcodes()

    def compare(self, want, got, excerpt, at):
        """None when `got` shows what `want` (the page's lines from index `at`) says, else
        what differs, with the page's line numbers."""
        if not excerpt:
            if len(want) == len(got) and all(self.same(w, g) for w, g in zip(want, got)):
                return None
            hunks = []
            for tag, i1, i2, j1, j2 in self.opcodes(want, got):
                if tag != "equal":
                    hunks.append(f"at line {at + i1 + 1}:")
                    hunks += [f"-{w}" for w in want[i1:i2]] + [f"+{g}" for g in got[j1:j2]]
            return "its output differs from the page's (- page, + output):\n" + "\n".join(hunks)
        j = 0
        for i, w in enumerate(want):
            if w.strip() == "...":
                continue
            while j < len(got) and not self.same(w, got[j]):
                j += 1
            if j == len(got):
                return (f"line {at + i + 1} is not in its output (in order):\n  {w}\n"
                        "--- output\n" + "\n".join(got))
            j += 1
        return None

    def updated(self, want, got, excerpt, unresolved):
        """The page's lines for this output: `want` where it still holds, else the
        output's."""
        if not excerpt:
            out = []
            for tag, i1, i2, j1, j2 in self.opcodes(want, got):
                if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
                    out += [w if self.same(w, g) else g for w, g in zip(want[i1:i2], got[j1:j2])]
                else:
                    out += got[j1:j2]
            return out
        out, at = [], 0
        for w in want:
            if w.strip() == "...":
                out.append(w)
                continue
            j = next((j for j in range(at, len(got)) if self.same(w, got[j])), None)
            if j is None:
                ratios = [(difflib.SequenceMatcher(None, self.mask(w), self.mask(got[k])).ratio(),
                           -k) for k in range(at, len(got))]
                ratio, k = max(ratios, default=(0, 0))
                if ratio < 0.6:
                    unresolved.append(w)
                    out.append(w)
                    continue
                j = -k
                w = got[j]
            out.append(w)
            at = j + 1
        return out


def run_page(runner, path, update):
    page = Page(path)
    name = os.path.relpath(path, runner.source_dir)
    failures = [f"{name}:{line}: {problem}" for line, problem in page.problems]
    ran, skipped, unresolved = 0, [], []
    replacements = {}  # line index -> new lines (or [] to delete)
    work = tempfile.mkdtemp(prefix="popkit-docs-")
    try:
        for d in LINKED:
            os.symlink(os.path.join(runner.source_dir, d), os.path.join(work, d))
        for block in page.blocks:
            without_mpi = False
            for step in page.steps(block):
                command, line = step["command"], step["at"] + 1
                # In a build without MPI an mpirun is not run, and the rest of its
                # transcript reads what it would have written: not run either.
                without_mpi = without_mpi or command.split()[0] == "mpirun" and not runner.mpi
                if without_mpi:
                    skipped.append(command)
                    continue
                if not runner.runs(command):
                    if not runner.listed(command):
                        failures.append(f"{name}:{line}: '{command}' is neither run nor listed "
                                        "as not run (tests/docs/transcripts.py: RUN, NOT_RUN)")
                    skipped.append(command)
                    continue
                ran += 1
                try:
                    rc, got = runner.execute(command, work)
                except subprocess.TimeoutExpired:
                    failures.append(f"{name}:{line}: '{command}' ran past {runner.timeout} s")
                    continue
                want = [page.lines[i] for i in step["out"]]
                lines = Lines(runner, step["measured"], step["trained"])
                if update:
                    new = lines.updated(want, got, step["excerpt"], unresolved)
                    if rc != 0 or step["rc_at"] is not None:
                        new += ["$ echo $?", str(rc)]
                    old = step["out"] + ([step["rc_at"], step["rc_at"] + 1]
                                         if step["rc_at"] is not None else [])
                    if [page.lines[i] for i in old] != new:
                        replacements[step["at"]] = [page.lines[step["at"]]] + new
                        for i in old:
                            replacements[i] = []
                    continue
                problem = None
                if rc != step["rc"]:
                    problem = f"exited {rc}, the page says {step['rc']}"
                else:
                    problem = lines.compare(want, got, step["excerpt"], step["at"] + 1)
                if problem:
                    failures.append(f"{name}:{line}: '{command}': {problem}")
        for i, image in page.images():
            drawn = os.path.join(work, os.path.basename(image))
            shown = os.path.relpath(image, runner.source_dir)
            if not os.path.isfile(drawn):
                failures.append(f"{name}:{i + 1}: {shown} is drawn by none of the page's "
                                f"transcripts (one must write {os.path.basename(image)})")
            elif update:
                if not os.path.isfile(image) or open(image, "rb").read() != open(drawn, "rb").read():
                    os.makedirs(os.path.dirname(image), exist_ok=True)
                    shutil.copyfile(drawn, image)
                    print(f"updated {shown}")
            elif not os.path.isfile(image) or open(image, "rb").read() != open(drawn, "rb").read():
                failures.append(f"{name}:{i + 1}: {shown} differs from what the page's "
                                f"transcripts draw (bash scripts/update_docs.sh redraws it)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if update and replacements:
        lines = []
        for i, line in enumerate(page.lines):
            lines += replacements.get(i, [line])
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
        print(f"updated {name}: {sum(1 for v in replacements.values() if v)} outputs")
    for w in unresolved:
        failures.append(f"{name}: an excerpt's line matches nothing in its output now; "
                        f"edit it by hand:\n  {w}")
    print(f"{name}: ran {ran} commands" +
          (f"; not run: {'; '.join(skipped)}" if skipped else ""))
    return failures


def main(argv):
    exact = len(argv) > 2 and argv[2] == "--exact"
    pages = argv[3:] if exact else argv[2:]
    if not pages or argv[1] not in ("check", "update"):
        print(__doc__)
        return 2
    source_dir = os.environ.get("POPKIT_SOURCE_DIR") or os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    runner = Runner(source_dir, exact)
    if runner.note:
        print(runner.note)
    failures = []
    for path in pages:
        failures += run_page(runner, os.path.abspath(path), argv[1] == "update")
    for failure in failures:
        print(f"FAIL: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
