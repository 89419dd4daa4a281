#!/usr/bin/env bash
# What poprun writes: every output path is checked before the first step (a run file
# path that is a folder, a FIFO or a blocked checkpoint fails at once, exit 1,
# nothing written; another writer's temporary blocks nothing); temporaries that killed
# runs left are removed, others kept; a run file that cannot be written says why and
# leaves no temporary.
set -uo pipefail
. "$POPKIT_SOURCE_DIR/tests/cli/lib.sh"
config="$POPKIT_SOURCE_DIR/tests/train/data/tiny.yaml"
work=$(mktemp -d)
cleanup() {
  mountpoint -q "$work/full" 2>/dev/null && umount "$work/full"
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work" || exit 1


# No checkpoint, run file or temporary in FOLDER.
nothing_written() {
  local left
  left=$(find "$1" -name 'checkpoint-step*' -o -name '.checkpoint-step*' -o -name '*.tmp' \
    -o -name '*.tmp-*' | sort)
  [ -z "$left" ] || fail "$2 left: $left"
}

# -o naming an existing folder.
mkdir -p o1/dir
expect 1 "poprun train: error: o1/dir: is a directory, not a run file: give a file path such as o1/dir/run.json" \
  -- poprun train "$config" --steps 1 --out o1/dir
nothing_written o1 "--out o1/dir"
# -o ending in a slash.
mkdir -p o2
expect 1 "poprun train: error: o2/: names a folder, not a run file: give a file path such as o2/run.json" \
  -- poprun train "$config" --steps 1 --out o2/
nothing_written o2 "--out o2/"
# -o naming a FIFO: rename would replace it; it stays a FIFO.
mkdir -p o3 && mkfifo o3/run.json
expect 1 "poprun train: error: o3/run.json: is not a regular file (a FIFO): the run file replaces what is at its path, so that must be a regular file or nothing" \
  -- poprun train "$config" --steps 1 --out o3/run.json
[ -p o3/run.json ] || fail "--out FIFO: the FIFO was replaced"
nothing_written o3 "--out o3/run.json (a FIFO)"
# Another writer's temporary of the run file (here a folder, so it cannot be replaced):
# each process writes through a name of its own, so the run is not stopped by it.
mkdir -p o4/run.json.tmp o4/.run.json.tmp-1
poprun train "$config" --steps 1 --out o4/run.json -q 2>o4.err || fail "o4: $(cat o4.err)"
[ -f o4/run.json ] && [ -d o4/run.json.tmp ] && [ -d o4/.run.json.tmp-1 ] || fail "o4: $(ls -a o4)"
# A checkpoint the run will write is a folder.
mkdir -p o5/checkpoint-step2.safetensors
expect 1 "poprun train: error: o5/checkpoint-step2.safetensors: is a directory, but this run may write its checkpoint of step 2 there: remove it or choose another --checkpoint-dir" \
  -- poprun train "$config" --steps 2 --out o5/run.json
[ ! -e o5/run.json ] || fail "o5: a run file was written"
# poprun eval -o a folder.
poprun train "$config" --steps 1 --out good/run.json -q >/dev/null 2>&1 || fail "train good/"
mkdir -p o6/dir
expect 1 "poprun eval: error: o6/dir: is a directory, not a run file: give a file path such as o6/dir/run.json" \
  -- poprun eval "$config" --checkpoint good/checkpoint-step1.safetensors --out o6/dir
nothing_written o6 "eval --out o6/dir"

# Stale temporaries: a checkpoint's whose writer is gone (PID 99999999 cannot exist) and
# the run file's go; a live writer's (PID 1), other names and folders stay.
mkdir -p s/.checkpoint-step4.safetensors.tmp-99999998
for f in .checkpoint-step3.safetensors.tmp-99999999 .checkpoint-step3.safetensors.tmp-1 \
  .checkpoint-step3.safetensors.tmp-x checkpoint-step3.safetensors.tmp-99999999 \
  .other-step3.safetensors.tmp-99999999 notes.txt .run.json.tmp-99999999 .run.json.tmp-1 \
  .other.json.tmp-99999999; do
  echo stale >"s/$f"
done
poprun train "$config" --steps 1 --out s/run.json 2>s.err >/dev/null || fail "train s/: $(cat s.err)"
for gone in .checkpoint-step3.safetensors.tmp-99999999 .run.json.tmp-99999999; do
  [ ! -e "s/$gone" ] || fail "stale s/$gone was kept"
  grep -qF "removed s/$gone, left by an earlier run that did not finish writing it" s.err ||
    fail "no note that s/$gone was removed: $(cat s.err)"
done
for kept in .checkpoint-step3.safetensors.tmp-1 .checkpoint-step3.safetensors.tmp-x \
  checkpoint-step3.safetensors.tmp-99999999 .other-step3.safetensors.tmp-99999999 notes.txt \
  .checkpoint-step4.safetensors.tmp-99999998 .run.json.tmp-1 .other.json.tmp-99999999; do
  [ -e "s/$kept" ] || fail "s/$kept was removed"
done

# A full disk under the run file: the reason, and no temporary left (needs root for mount).
mkdir -p full
if mount -t tmpfs -o size=64k tmpfs full 2>/dev/null; then
  dd if=/dev/zero of=full/filler bs=4k 2>/dev/null
  expect 1 ": cannot write: No space left on device (the checkpoint of step 1 is ck/checkpoint-step1.safetensors)" \
    -- poprun train "$config" --steps 1 --run-dir rd --out full/run.json --checkpoint-dir ck
  [ -z "$(find full -name '.run.json.tmp-*')" ] || fail "a failed run file write left $(ls -a full)"
  [ -f ck/checkpoint-step1.safetensors ] || fail "no checkpoint beside the failed run file"
  # The run folder itself on the full disk: its config.yaml fails before the first step.
  expect 1 ": cannot write: No space left on device" \
    -- poprun train "$config" --steps 1 --run-dir full/rd2 --checkpoint-dir ck2
  [ -z "$(find full -name '.*.tmp-*')" ] && [ ! -e ck2/checkpoint-step1.safetensors ] ||
    fail "a run with its folder on a full disk: $(find full ck2)"
  umount full
else
  echo "skipped: the full-disk case (mount -t tmpfs is not allowed here)"
fi

finish "poprun outputs"
