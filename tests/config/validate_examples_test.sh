#!/usr/bin/env bash
# Every example validates with `popplan validate` (exit 0, together and one by one),
# `popplan schema` prints schemas/config.schema.json byte for byte, and every example
# validates against that schema with Debian's python3-jsonschema (/usr/bin/python3,
# not whatever python3 comes first on PATH).
set -euo pipefail
cd "$POPKIT_SOURCE_DIR"
shopt -s nullglob
examples=(examples/*.yaml)
[ "${#examples[@]}" -ge 6 ] || { echo "FAIL: only ${#examples[@]} examples"; exit 1; }
popplan validate "${examples[@]}"
for f in "${examples[@]}"; do
  head -n 1 "$f" | grep -qx '# yaml-language-server: $schema=../schemas/config.schema.json' \
    || { echo "FAIL: $f does not start with the yaml-language-server schema line"; exit 1; }
done
schema=$(mktemp)
trap 'rm -f "$schema"' EXIT
popplan schema > "$schema"
cmp "$schema" schemas/config.schema.json || { echo "FAIL: popplan schema differs from the file"; exit 1; }
/usr/bin/python3 - "$schema" "${examples[@]}" <<'PY'
import json, sys
import jsonschema, yaml
schema = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(schema)
validator = jsonschema.Draft202012Validator(schema)
failed = False
for path in sys.argv[2:]:
    # BaseLoader would keep everything a string; SafeLoader types scalars as YAML does.
    doc = yaml.safe_load(open(path))
    for error in validator.iter_errors(doc):
        failed = True
        print(f"FAIL: {path}: {'.'.join(map(str, error.path))}: {error.message}")
# The schema must also reject what the validator rejects for unknown keys.
bad = {"version": 1, "model": {"layers": [{"name": "a", "out_features": 10}]}, "trainig": {}}
if validator.is_valid(bad):
    failed = True
    print("FAIL: the schema accepts an unknown top-level key")
sys.exit(1 if failed else 0)
PY
echo "examples: ${#examples[@]} valid with popplan and against the schema"
