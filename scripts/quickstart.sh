#!/usr/bin/env bash
# The main job, in one command: installs what is missing, builds (release), fetches the
# data, installs the tools in $POPKIT_PREFIX (default /usr/local: on PATH in a new shell,
# with the man pages and bash completion), then validates, plans and trains
# examples/mnist.yaml and prints the report. Idempotent: run it again after pulling to
# rebuild and reinstall. A step whose tool verb is not built yet is reported and the run
# stops there.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
config=${1:-examples/mnist.yaml}
prefix=${POPKIT_PREFIX:-/usr/local}
say() { printf '[quickstart] %s\n' "$*"; }

say "step 1/8: dependencies"
bash "$root/scripts/install_deps.sh"
say "step 2/8: build (release)"
bash "$root/scripts/build.sh" release
say "step 3/8: data"
bash "$root/scripts/fetch_data.sh"
say "step 4/8: install the tools in $prefix (bin, man pages, bash completion, profiles)"
sudo=""
if ! { [ -w "$prefix" ] || { [ ! -e "$prefix" ] && [ -w "$(dirname "$prefix")" ]; }; }; then
  command -v sudo >/dev/null || { echo "need root (or sudo) to install in $prefix" >&2; exit 1; }
  sudo=sudo
fi
$sudo cmake --install "$root/build/release" --prefix "$prefix" >/dev/null
case ":$PATH:" in
  *":$prefix/bin:"*) say "popplan, poprun and popreport are in $prefix/bin, on PATH" ;;
  *) say "popplan, poprun and popreport are in $prefix/bin: add it to PATH" ;;
esac

bin=$prefix/bin  # the installed tools, as a new shell finds them
cd "$root"
has_verb() { "$bin/$1" --help | grep -qE "^  $2( |$)"; }
stop_unless() {
  if ! has_verb "$1" "$2"; then
    say "'$1 $2' is not built yet in this version: stopping here (see the open issues)"
    exit 0
  fi
}

run_dir=runs/$(basename "$config" .yaml)
mkdir -p "$run_dir"

say "step 5/8: popplan validate $config"
stop_unless popplan validate
"$bin/popplan" validate "$config"

say "step 6/8: popplan plan $config"
stop_unless popplan plan
"$bin/popplan" plan "$config" --format json -o "$run_dir/plan.json" >/dev/null || true
"$bin/popplan" plan "$config"

say "step 7/8: poprun train $config"
stop_unless poprun train
"$bin/poprun" train "$config" --out "$run_dir/run.json" --force  # a re-run replaces its run

say "step 8/8: popreport"
stop_unless popreport memory
"$bin/popreport" memory "$run_dir/run.json"
"$bin/popreport" throughput "$run_dir/run.json"
say "done: run file $run_dir/run.json"
