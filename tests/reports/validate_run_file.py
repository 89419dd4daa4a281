"""Validates run files against schemas/run.schema.json (JSON Schema 2020-12).

Usage: /usr/bin/python3 validate_run_file.py SCHEMA FILE...
Needs Debian's python3-jsonschema. Exit 0 when every file is valid, 1 otherwise.
"""
import json
import sys

import jsonschema


def main() -> int:
    schema_path, *files = sys.argv[1:]
    with open(schema_path, encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    status = 0
    for path in files:
        with open(path, encoding="utf-8") as f:
            document = json.load(f)
        for error in validator.iter_errors(document):
            where = "/".join(str(p) for p in error.absolute_path) or "(root)"
            print(f"{path}: {where}: {error.message}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
