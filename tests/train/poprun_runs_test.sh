#!/usr/bin/env bash
# Run folders and metrics.jsonl as a user meets them: each `poprun train` gets its own
# runs/<name>/<stamp>/ with runs/<name>/latest pointing at it, holding its config.yaml
# (with the command line and the config's hash) that every tool loads, and `poprun eval`
# and popreport take the folder; nothing is overwritten without --force (exit 2); a
# folder in use by another run is refused (exit 2) naming it; --resume latest | RUN_DIR |
# CKPT; a resumed run's file starts with the earlier run's losses and its summary counts
# this process's steps; and metrics.jsonl, read with `tail -f` while the run trains, has
# one valid line per step whose losses are the run file's.
set -uo pipefail
. "$POPKIT_SOURCE_DIR/tests/cli/lib.sh"
config="$POPKIT_SOURCE_DIR/tests/train/data/tiny.yaml"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
cd "$work" || exit 1

# check_metrics RUN_DIR FIRST_STEP [EVALUATIONS]: metrics.jsonl against the run file, with
# that many evaluations when given.
check_metrics() {
  /usr/bin/python3 - "$1/metrics.jsonl" "$1/run.json" "$2" "${3:-}" <<'PY' || fail "$1/metrics.jsonl: see above"
import json, sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
run = json.load(open(sys.argv[2]))
first = int(sys.argv[3])
rows = [json.loads(line) for line in lines]  # each line one JSON object
steps = [r["step"] for r in rows]
assert steps == list(range(first + 1, first + 1 + len(rows))), steps
assert len(rows) == len(run["loss"]) - first, (len(rows), len(run["loss"]), first)
assert [r["loss"] for r in rows] == run["loss"][first:], "losses differ from the run file's"
assert [r["step_seconds"] for r in rows] == run["step_seconds"][first:]
for r in rows:
    assert set(r) - {"test"} == {"step", "epoch", "loss", "samples_per_second", "learning_rate",
                                 "step_seconds", "phase_seconds"}, set(r)
    assert r["learning_rate"] == run["config"]["training"]["optimizer"]["lr"]
    assert [p["name"] for p in run["phases"]] == list(r["phase_seconds"]), r["phase_seconds"]
# The evaluations while it trained: on the line of the step they followed, as in the run file.
tested = [{"step": r["step"], "epoch": r["epoch"], **r["test"]} for r in rows if "test" in r]
assert tested == [e for e in run.get("evaluations", []) if e["step"] > first], tested
if sys.argv[4]:
    assert len(tested) == int(sys.argv[4]), (len(tested), sys.argv[4])
print(f"{sys.argv[1]}: {len(rows)} lines, steps {steps[0]}..{steps[-1]}, losses as in the run file")
PY
}

# A first run in a new stamped folder, latest pointing at it.
out=$(poprun train "$config" --steps 6 2>first.err) || fail "first run: $(cat first.err)"
first=$(readlink runs/tiny/latest)
[[ $first =~ ^[0-9]{8}-[0-9]{6}(-[0-9]+)?$ ]] || fail "runs/tiny/latest -> '$first', want a stamp"
grep -qF "  run file              runs/tiny/$first/run.json" <<<"$out" || fail "summary: $out"
grep -qF "  metrics               runs/tiny/$first/metrics.jsonl" <<<"$out" || fail "summary: $out"
[ -f "runs/tiny/$first/checkpoint-step6.safetensors" ] || fail "no checkpoint in runs/tiny/$first"
check_metrics "runs/tiny/$first" 0

# The folder describes its run: the config as resolved, loadable by every tool, with the
# command line and the config's hash; eval and the reports take the folder itself.
run1="runs/tiny/$first"
grep -qxF "# command: poprun train $config --steps 6" "$run1/config.yaml" || fail "command: $(head -4 "$run1/config.yaml")"
hash=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["config_hash"])' "$run1/run.json")
grep -qxF "# config hash: $hash" "$run1/config.yaml" || fail "hash $hash: $(head -4 "$run1/config.yaml")"
popplan validate "$run1/config.yaml" -q || fail "popplan validate $run1/config.yaml"
cmp -s <(popplan plan "$config" --format json) <(popplan plan "$run1/config.yaml" --format json) \
  || fail "the run folder's config plans otherwise than the config"
out=$(poprun eval "$run1" 2>&1) || fail "poprun eval RUN_DIR: $out"
grep -qE "^$run1/checkpoint-step6.safetensors on the 128 test samples: loss" <<<"$out" || fail "eval RUN_DIR: $out"
out=$(poprun eval "$config" --checkpoint "$run1" 2>&1) || fail "poprun eval --checkpoint RUN_DIR: $out"
grep -qF "$run1/checkpoint-step6.safetensors on the 128 test samples" <<<"$out" || fail "eval --checkpoint RUN_DIR: $out"
expect 2 "poprun eval: error: no checkpoint to evaluate: give --checkpoint CHECKPOINT, or a run folder instead of $config" \
  -- poprun eval "$config"
# Every tool that takes a config takes the folder, or its run file, for it.
for form in "$run1" "$run1/run.json"; do
  cmp -s <(popplan plan "$config" --format json) <(popplan plan "$form" --format json) \
    || fail "popplan plan $form plans otherwise than the config"
  popplan tune "$form" --top 1 >/dev/null || fail "popplan tune $form"
  popplan groups "$form" >/dev/null || fail "popplan groups $form"
  out=$(poprun eval "$form" 2>&1) || fail "poprun eval $form: $out"
  grep -qE "^$run1/checkpoint-step6.safetensors on the 128 test samples: loss" <<<"$out" \
    || fail "eval $form: $out"
done
poprun train "$run1/run.json" --steps 2 --run-dir from-run-file -q || fail "poprun train RUN_DIR/run.json"
grep -qxF "# config hash: $hash" from-run-file/config.yaml || fail "a run of $run1/run.json: another config"
rm -rf from-run-file
for verb in memory throughput; do
  popreport "$verb" "$run1" >/dev/null || fail "popreport $verb RUN_DIR"
done
expect 2 "popreport memory: error: runs: a folder without run.json" -- popreport memory runs

# The same command again: a second folder, the first untouched.
sum=$(md5sum "runs/tiny/$first/run.json")
poprun train "$config" --steps 6 -q || fail "second run"
second=$(readlink runs/tiny/latest)
[ "$second" != "$first" ] && [ -f "runs/tiny/$second/run.json" ] || fail "second run: $(ls runs/tiny)"
[ "$(md5sum "runs/tiny/$first/run.json")" = "$sum" ] || fail "the second run changed the first's run file"

# --resume latest: a new folder, the history in its run file, the summary split.
out=$(poprun train "$config" --steps 10 --resume latest 2>resume.err) || fail "resume latest: $(cat resume.err)"
grep -qE "^trained tiny: 4 steps in [0-9.]+ s \(this process, resumed at step 6\); 10 steps in total$" <<<"$out" \
  || fail "resumed summary: $out"
third=$(readlink runs/tiny/latest)
[ "$third" != "$second" ] || fail "--resume latest wrote into the run it resumed"
/usr/bin/python3 - "runs/tiny/$second/run.json" "runs/tiny/$third/run.json" "runs/tiny/$second" <<'PY' || fail "resumed run file"
import json, sys
earlier, resumed = (json.load(open(p)) for p in sys.argv[1:3])
assert len(resumed["loss"]) == 10 and resumed["loss"][:6] == earlier["loss"], resumed["loss"]
assert resumed["step_seconds"][:6] == earlier["step_seconds"]
f = resumed["resumed_from"]
assert f["run_dir"] == sys.argv[3] and f["step"] == 6, f
assert f["checkpoint"] == sys.argv[3] + "/checkpoint-step6.safetensors", f
PY
check_metrics "runs/tiny/$third" 6
# A resume continues the same training: a checkpoint of another config, or a limit below
# the checkpoint's step, is refused (exit 2) with latest and the folders as they were; at
# the run's end nothing is trained, and no folder is made.
folders=$(ls runs/tiny)
expect 2 "poprun train: error: runs/tiny/$third/checkpoint-step10.safetensors was written under another config: training.optimizer.lr (0.01 there, 0.5 here)" \
  -- poprun train "$config" --steps 12 --resume latest --set training.optimizer.lr=0.5
expect 2 "poprun train: error: runs/tiny/$third/checkpoint-step10.safetensors is at step 10, past this run's end (--steps 2)" \
  -- poprun train "$config" --steps 2 --resume latest
out=$(poprun train "$config" --steps 10 --resume latest 2>&1) || fail "resume at the end: $out"
grep -qxF "nothing to train: runs/tiny/$third/checkpoint-step10.safetensors is at step 10, the end of this run (--steps 10); no run folder was made. Give more steps or epochs to train on" <<<"$out" \
  || fail "resume at the end: $out"
[ "$(ls runs/tiny)" = "$folders" ] && [ "$(readlink runs/tiny/latest)" = "$third" ] \
  || fail "refused or empty resumes changed runs/tiny: $(ls -l runs/tiny)"
# popreport reads the whole run: 10 steps, and says where it resumed.
report=$(popreport throughput "runs/tiny/$third/run.json") || fail "popreport throughput: $report"
grep -qF "10 steps, the first 2 not counted (warm-up)" <<<"$report" || fail "throughput: $report"
flat=$(tr -s ' \n' ' ' <<<"$report")  # its notes are wrapped to 100 columns: read as one line
grep -qF "resumed at step 6: steps 1-6 are the earlier run's (runs/tiny/$second/run.json), the rest this run's" \
  <<<"$flat" || fail "throughput does not say where the run resumed: $report"
grep -qF "the mean per step over this process's 4 steps" <<<"$flat" || fail "phase times: $report"
popreport compare "runs/tiny/$second/run.json" "runs/tiny/$third/run.json" --chart both.svg >/dev/null \
  || fail "popreport compare --chart"
grep -qF "resumed at step 6, the earlier steps from runs/tiny/$second/run.json" both.svg || fail "chart: no resume note"
# A row given through latest is named by the stamp latest points at, not "tiny/latest".
rows=$(popreport compare "runs/tiny/$second" runs/tiny/latest 2>&1) || fail "compare: $rows"
grep -qE "^ *tiny/$third " <<<"$rows" || fail "compare names latest's row: $rows"
grep -q "tiny/latest" <<<"$rows" && fail "compare names a row tiny/latest: $rows"
# --resume RUN_DIR and --resume CHECKPOINT
poprun train "$config" --steps 8 --resume "runs/tiny/$first" --run-dir from-dir -q || fail "--resume RUN_DIR"
grep -q '"step": 6' from-dir/run.json || fail "--resume RUN_DIR: $(cat from-dir/run.json | head -5)"
poprun train "$config" --steps 8 --resume "runs/tiny/$first/checkpoint-step6.safetensors" --run-dir from-ckpt -q \
  || fail "--resume CHECKPOINT"
cmp -s from-dir/checkpoint-step8.safetensors from-ckpt/checkpoint-step8.safetensors || fail "RUN_DIR and CKPT differ"

# Nothing overwritten without --force: exit 2, the message names it.
expect 2 "poprun train: error: --run-dir from-dir holds an earlier run (run.json, metrics.jsonl, 1 checkpoint); poprun does not overwrite a run: give another --run-dir, leave out --run-dir and -o for a new folder under runs/tiny/, or give --force to write over it" \
  -- poprun train "$config" --steps 2 --run-dir from-dir
expect 2 "or give --force" -- poprun train "$config" --steps 2 -o from-dir/run.json
poprun train "$config" --steps 2 --run-dir from-dir --force -q || fail "--force"
# --force leaves nothing of the earlier run to resume: from-dir's step-8 checkpoint (of
# another lr here) is gone, so --resume from-dir continues the forced run.
poprun train "$config" --steps 3 --run-dir from-dir --force --set training.optimizer.lr=0.5 -q \
  || fail "--force with another lr"
[ "$(ls from-dir | grep -c checkpoint-step)" = 1 ] || fail "--force left: $(ls from-dir)"
out=$(poprun train "$config" --steps 5 --resume from-dir --set training.optimizer.lr=0.5 --run-dir after-force 2>&1) \
  || fail "--resume of the forced folder: $out"
grep -qF "resuming from from-dir/checkpoint-step3.safetensors at step 3" <<<"$out" || fail "after --force: $out"
expect 2 "from-dir/checkpoint-step3.safetensors was written under another config: training.optimizer.lr (0.5 there, 0.01 here)" \
  -- poprun train "$config" --steps 5 --resume from-dir --run-dir after-force-2
expect 2 "poprun train: error: --resume latest: runs/other/latest does not exist" \
  -- poprun train "$config" --set name=other --resume latest

# One run per folder: a run on a folder that another run writes is refused at once (exit 2),
# naming the holder, --force or not; when the holder ends, the folder is free.
poprun train "$config" --steps 100000000 --run-dir busy -q 2>busy.err &
pid=$!
for _ in $(seq 100); do [ -s busy/metrics.jsonl ] && break; sleep 0.1; done
start=$SECONDS
for force in "" --force; do
  expect 2 "poprun train: error: busy is in use by another run: pid $pid on host $(hostname) since " \
    -- poprun train "$config" --steps 2 --run-dir busy $force
  expect 2 " UTC: poprun train $config --steps 100000000 --run-dir busy -q; two runs in one folder would mix their checkpoints and metrics" \
    -- poprun train "$config" --steps 2 --run-dir busy $force
done
[ $((SECONDS - start)) -le 10 ] || fail "four refusals took $((SECONDS - start)) s"
kill -TERM $pid
wait $pid
[ $? = 130 ] || fail "the holder: $(cat busy.err)"
[ ! -e busy/.poprun.lock ] || fail "the lock file outlived its run"
# Two runs started together on one new folder: one runs, the other is refused.
for try in 1 2 3; do
  poprun train "$config" --steps 20 --run-dir "race$try" -q 2>"race$try.a" &
  a=$!
  poprun train "$config" --steps 20 --run-dir "race$try" -q 2>"race$try.b" &
  b=$!
  wait $a
  rc_a=$?
  wait $b
  rc_b=$?
  [ "$(printf '%s\n' $rc_a $rc_b | sort | tr '\n' ' ')" = "0 2 " ] ||
    fail "race $try: exit codes $rc_a and $rc_b, want 0 and 2: $(cat "race$try.a" "race$try.b")"
  [ "$(wc -l <"race$try/metrics.jsonl")" = 20 ] || fail "race $try: $(wc -l <"race$try/metrics.jsonl") metrics lines"
done

# tail -f while the run trains: the lines arrive before it ends (flushed each step).
poprun train "$config" --steps 100000000 --run-dir long -q 2>long.err &
pid=$!
for _ in $(seq 100); do [ -s long/metrics.jsonl ] && break; sleep 0.1; done
tail -n +1 -f long/metrics.jsonl >tailed.jsonl &
tail_pid=$!
for _ in $(seq 100); do [ "$(wc -l <tailed.jsonl)" -ge 20 ] && break; sleep 0.1; done
kill -0 $pid 2>/dev/null || fail "the run ended before tail saw its lines"
[ "$(wc -l <tailed.jsonl)" -ge 20 ] || fail "tail -f saw $(wc -l <tailed.jsonl) lines during the run"
kill -TERM $pid
wait $pid
[ $? = 130 ] || fail "SIGTERM: $(cat long.err)"
sleep 0.3
kill $tail_pid
wait $tail_pid 2>/dev/null
cmp -s tailed.jsonl long/metrics.jsonl || fail "what tail -f read differs from the file"
check_metrics long 0

# Periodic evaluation (eval.every) is in metrics.jsonl and the run file, not on stderr alone;
# a resumed run's file keeps the earlier run's evaluations up to its checkpoint. 16 steps an
# epoch: evaluated after steps 16 and 32, then 48 in the resumed run.
poprun train "$config" --set eval.every=1 --set training.epochs=4 --steps 40 --run-dir evaluated \
  -q 2>evaluated.err || fail "eval.every run: $(cat evaluated.err)"
check_metrics evaluated 0 2
poprun train "$config" --set eval.every=1 --set training.epochs=4 --steps 50 --resume evaluated \
  --run-dir evaluated.more -q 2>evaluated.err || fail "eval.every resumed: $(cat evaluated.err)"
check_metrics evaluated.more 40 1
/usr/bin/python3 - evaluated/run.json evaluated.more/run.json <<'PY' || fail "evaluations in the run files"
import json, sys
first, resumed = (json.load(open(p)) for p in sys.argv[1:])
assert [(e["step"], e["epoch"]) for e in first["evaluations"]] == [(16, 1), (32, 2)], first["evaluations"]
assert resumed["evaluations"][:2] == first["evaluations"], resumed["evaluations"]
assert [(e["step"], e["epoch"]) for e in resumed["evaluations"]] == [(16, 1), (32, 2), (48, 3)]
for e in resumed["evaluations"]:
    assert e["n_samples"] == 128 and 0 <= e["accuracy"] <= 1, e
PY

finish "poprun run folders"
