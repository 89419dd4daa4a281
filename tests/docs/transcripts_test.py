#!/usr/bin/python3
"""tests/docs/transcripts.py checks what it should and updates what it should: a page
whose whole output, excerpt and exit code are each wrong fails with each one's page line,
`update` rewrites exactly those lines (keeping the "..." and the text that still holds),
and the updated page then passes."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = [sys.executable, os.path.join(HERE, "transcripts.py")]

STALE = """\
# A page

```console
$ popplan groups --factor 4 --group-size 2 --stride 2
Group | Replicas
------+---------
    0 | 0, 1
    1 | 2, 3
```

Text between transcripts stays.

```console
$ popplan validate examples/invalid/bad.yaml
...
examples/invalid/bad.yaml: invalid (3 errors)
$ echo $?
2
$ popplan validate examples/quick.yaml
examples/quick.yaml: valid
$ echo $?
1
```
"""

# What update makes of STALE: the whole output, the excerpt's stale line and the exit
# code as the tools give them, every other line as it was.
FRESH = STALE.replace("0 | 0, 1\n    1 | 2, 3", "0 | 0, 2\n    1 | 1, 3").replace(
    "(3 errors)", "(2 errors)").replace("valid\n$ echo $?\n1", "valid\n$ echo $?\n0")


def run(verb, page):
    # --exact: the stale figures are plans and groups, not trained, so they must be
    # reported on every build (a sanitized one or another CPU level masks trained figures).
    done = subprocess.run(TOOL + [verb, "--exact", page], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    return done.returncode, done.stdout


def main():
    failures = []
    with tempfile.TemporaryDirectory() as folder:
        page = os.path.join(folder, "page.md")
        with open(page, "w", encoding="utf-8") as f:
            f.write(STALE)
        rc, out = run("check", page)
        name = os.path.relpath(page, os.environ["POPKIT_SOURCE_DIR"])
        for want in (f"FAIL: {name}:4: 'popplan groups", "at line 7:", "-    0 | 0, 1",
                     "+    0 | 0, 2", f"FAIL: {name}:14: 'popplan validate examples/invalid",
                     "line 16 is not in its output", f"FAIL: {name}:19: 'popplan validate "
                     "examples/quick.yaml': exited 0, the page says 1"):
            if want not in out:
                failures.append(f"check's output lacks {want!r}")
        if rc != 1:
            failures.append(f"check of the stale page exited {rc}, want 1")
        rc, out = run("update", page)
        updated = open(page, encoding="utf-8").read()
        if updated != FRESH:
            failures.append("update made:\n" + updated)
        rc, out = run("check", page)
        if rc != 0:
            failures.append(f"check of the updated page exited {rc}:\n{out}")
    for failure in failures:
        print(f"FAIL: {failure}")
    print("transcripts: ok" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
