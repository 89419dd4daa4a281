#!/usr/bin/python3
"""Writes docs/config.md, the reference of every config key, from the config's JSON Schema.

The schema (schemas/config.schema.json, which `popplan schema` prints) is the contract:
what it lists is exactly what the validator accepts. This page is made from it, so the
two cannot drift: the test docs.config_reference fails when the committed page differs
from what this script makes.

  config_reference.py [SCHEMA]            print the page
  config_reference.py --write PAGE        write it (scripts/update_docs.sh does)
  config_reference.py --check PAGE        exit 1 when PAGE is not what it would write
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA = os.path.join(ROOT, "schemas", "config.schema.json")

INTRO = """\
# Config reference

<!-- Made by scripts/config_reference.py from schemas/config.schema.json: edit the
schema, then run `bash scripts/update_docs.sh`. The test docs.config_reference fails when
this page differs from what the script makes. -->

One YAML file describes a run. This page lists every key the validator accepts, section
by section, with its type, its default and what it means; it is made from the config's
JSON Schema (`popplan schema` prints it, and `examples/*.yaml` point editors at it with a
`# yaml-language-server: $schema=...` line). `popplan validate CONFIG` checks a file
against these rules and the ones a schema cannot express (grouping arithmetic, phase
order, rules across sections), every problem at `file:line:column`. Every tool that
reads a config takes `--set key.path=value` for any key below (repeatable, values typed
as YAML).

[concepts.md](concepts.md) explains what the keys do; the examples in `examples/` use
them.
"""


def literal(value):
    """A value as it is written in YAML."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value else '""'
    if isinstance(value, float) and value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e6):
        return f"{value:.1e}".replace("e-0", "e-")
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {literal(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


def bounds(node):
    out = []
    for key, sign in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"),
                      ("exclusiveMaximum", "<")):
        if key in node:
            out.append(f"{sign} {literal(node[key])}")
    return out


def type_of(node):
    """A short description of the values a schema node accepts."""
    if "const" in node:
        return f"`{literal(node['const'])}`"
    if "enum" in node:
        return "one of " + ", ".join(f"`{literal(v)}`" for v in node["enum"])
    for key in ("oneOf", "anyOf"):
        if key in node:
            return " or ".join(type_of(n) for n in node[key])
    kinds = node.get("type")
    if isinstance(kinds, list):
        kinds = [k for k in kinds if k != "null"]
        kinds = kinds[0] if len(kinds) == 1 else kinds
    if kinds in ("integer", "number"):
        return " ".join([kinds] + [", ".join(bounds(node))]).strip()
    if kinds == "string":
        if "pattern" in node:
            return f"string matching `{node['pattern']}`"
        return "non-empty string" if node.get("minLength") else "string"
    if kinds == "boolean":
        return "boolean"
    if kinds == "array":
        at_least = f", at least {node['minItems']}" if node.get("minItems", 0) > 1 else ""
        item = type_of(node.get("items", {}))
        item = {"map (keys below)": "maps (keys below)"}.get(item, item)
        return f"list of {item}{at_least}".replace("list of list of", "list of lists of")
    if kinds == "object" or "properties" in node:
        if isinstance(node.get("additionalProperties"), dict):
            return "map of names to maps (keys below)"
        return "map (keys below)"
    return "any"


def kind_rules(node):
    """`allOf` if/then entries keyed on a `type` const: what each kind needs and refuses."""
    rules = []
    for entry in node.get("allOf", []):
        kind = entry.get("if", {}).get("properties", {}).get("type", {}).get("const")
        if kind is None:
            continue
        then = entry.get("then", {})
        needs = then.get("required", [])
        refuses = [r for n in then.get("not", {}).get("anyOf", []) for r in n.get("required", [])]
        parts = []
        if needs:
            parts.append("needs " + ", ".join(f"`{k}`" for k in needs))
        if refuses:
            parts.append("refuses " + ", ".join(f"`{k}`" for k in refuses))
        rules.append(f"`type: {kind}` " + "; ".join(parts))
    return rules


def rows(node, path, required=(), own=True):
    """Table rows (path, type, default, description) of a node (unless not `own`) and
    everything under it."""
    out = []
    if own:
        default = f"`{literal(node['default'])}`" if "default" in node else (
            "required" if path.split(".")[-1].removesuffix("[]") in required else "")
        description = node.get("description", "")
        rules = kind_rules(node.get("items", node))
        if rules:
            description += " By kind: " + "; ".join(rules) + "."
        out.append((path, type_of(node), default, description))
    items = node.get("items") if node.get("type") == "array" else None
    if items and "properties" in items:
        for key, child in items["properties"].items():
            out += rows(child, f"{path}[].{key}", items.get("required", []))
    for key, child in node.get("properties", {}).items():
        out += rows(child, f"{path}.{key}" if path else key, node.get("required", []))
    if isinstance(node.get("additionalProperties"), dict):
        for key, child in node["additionalProperties"].get("properties", {}).items():
            out += rows(child, f"{path}.<name>.{key}")
    return out


def anchor_of(heading):
    """GitHub's anchor for a heading."""
    kept = "".join(c for c in heading.lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


def cell(text):
    return text.replace("|", "\\|").replace("\n", " ")


def page(schema):
    lines = [INTRO]
    top = schema["properties"]
    lines.append("| section | what it holds |\n|---|---|")
    scalars = [key for key, node in top.items() if "properties" not in node]
    heading = ", ".join(scalars)
    for key, node in top.items():
        anchor = f"[`{key}`](#{anchor_of(heading if key in scalars else key)})"
        lines.append(f"| {anchor} | {cell(node.get('description', ''))} |")
    header = "| key | type | default | meaning |\n|---|---|---|---|"
    required = schema.get("required", [])
    lines.append(f"\n## {heading}\n\nThe file's own keys.\n\n{header}")
    for key in scalars:
        lines += [table_row(row) for row in rows(top[key], key, required)]
    for key, node in top.items():
        if key in scalars:
            continue
        lines.append(f"\n## {key}\n")
        needed = " This section is required." if key in required else ""
        if isinstance(node.get("type"), list) and "null" in node["type"]:
            needed += f" It may be written empty (`{key}:`), taking every default."
        lines.append(node.get("description", "") + needed + "\n\n" + header)
        lines += [table_row(row) for row in rows(node, key, required, own=False)]
    return "\n".join(lines) + "\n"


def table_row(row):
    path, kind, default, description = row
    return f"| `{path}` | {cell(kind)} | {cell(default)} | {cell(description)} |"


def main(argv):
    args = argv[1:]
    mode = args.pop(0) if args and args[0] in ("--write", "--check") else None
    target = args.pop(0) if mode else None
    schema = json.load(open(args[0] if args else SCHEMA, encoding="utf-8"))
    text = page(schema)
    if mode is None:
        sys.stdout.write(text)
        return 0
    if mode == "--write":
        with open(target, "w", encoding="utf-8") as f:
            f.write(text)
        return 0
    current = open(target, encoding="utf-8").read() if os.path.exists(target) else ""
    if current != text:
        print(f"FAIL: {os.path.relpath(target)} is not what scripts/config_reference.py makes "
              "from the schema: run `bash scripts/update_docs.sh` and commit the result")
        return 1
    print(f"{os.path.relpath(target)}: as made from the schema")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
