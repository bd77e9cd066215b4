#!/usr/bin/env python3
"""The code's shape, as issue 29 measures it, at the working tree or at git revisions:
the engine's top type's stored properties, the largest of its machines', `@unchecked Sendable` and
`Task {` in product code, and lines per module. Usage: bench/shape.py [REV ...] [--json]
(no REV: the working tree). Figures only: no build, no root."""
import json
import re
import subprocess
import sys
from collections import defaultdict

TOP = "SessionStateMachine"
PROPERTY = re.compile(r"^(public |internal |private |fileprivate )?(public internal\(set\) |private\(set\) |internal\(set\) |public private\(set\) )?(var|let) ")


def files(rev):
    if rev is None:
        out = subprocess.run(["git", "ls-files", "Sources"], capture_output=True, text=True, check=True).stdout.split()
        return {path: open(path, encoding="utf-8").read() for path in out if path.endswith(".swift")}
    out = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "Sources"], capture_output=True, text=True, check=True).stdout.split()
    return {path: subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True, check=True).stdout
            for path in out if path.endswith(".swift")}


def stored_properties(source, name):
    """Stored properties declared in the body of `struct name` (at its top level: not in nested types or
    computed properties), or None if the file does not declare it."""
    match = re.search(r"\n(public |internal )?struct " + re.escape(name) + r"\b[^{]*\{", source)
    if not match:
        return None
    depth, line, count, index = 1, "", 0, match.end()
    while depth > 0 and index < len(source):
        char = source[index]
        if char == "{":
            if depth == 1 and PROPERTY.match(line.strip()):
                line += "{"  # a computed property, or a nested type's body: not stored
            depth += 1
        elif char == "}":
            depth -= 1
        elif char == "\n":
            if depth == 1:
                text = line.strip()
                if PROPERTY.match(text) and "{" not in text and not text.startswith("static"):
                    count += 1
                line = ""
        elif depth == 1:
            line += char
        index += 1
    return count


def shape(rev):
    sources = files(rev)
    product = {path: text for path, text in sources.items() if not path.startswith(("Sources/lanchat-bench/", "Sources/LanchatFuzz/"))}
    top = next(n for n in (stored_properties(text, TOP) for text in sources.values()) if n is not None)
    machines = {}
    for path, text in sources.items():
        if not path.startswith("Sources/LanchatEngine/"):
            continue
        for name in re.findall(r"\n(?:public )?struct (\w*(?:Machine|Book|Table|Exchange|Outbox|Schedule|Transfer))\b", "\n" + text):
            count = stored_properties(text, name)
            if count is not None and name != TOP:
                machines[name] = count
    lines = defaultdict(int)
    for path, text in sources.items():
        lines[path.split("/")[1]] += text.count("\n")
    largest = max(machines.items(), key=lambda item: item[1]) if machines else ("-", 0)
    return {
        "revision": rev or "working tree",
        "top_stored_properties": top,
        "machines": dict(sorted(machines.items())),
        "largest_machine": {"name": largest[0], "stored_properties": largest[1]},
        "unchecked_sendable": sum(text.count("@unchecked Sendable") for text in product.values()),
        "unchecked_sendable_outside_c_boundary": sum(text.count("@unchecked Sendable") for path, text in product.items() if not path.startswith("Sources/DNSSD/")),
        "task_blocks": sum(len(re.findall(r"\bTask(\.detached)? \{", text)) for text in product.values()),
        "lines_per_module": dict(sorted(lines.items())),
    }


def main():
    args = [a for a in sys.argv[1:] if a != "--json"]
    results = [shape(rev) for rev in (args or [None])]
    if "--json" in sys.argv:
        print(json.dumps(results, indent=2))
        return
    for result in results:
        print(f"{result['revision']}: {TOP} has {result['top_stored_properties']} stored properties; "
              f"largest machine {result['largest_machine']['name']} ({result['largest_machine']['stored_properties']}); "
              f"@unchecked Sendable {result['unchecked_sendable']} ({result['unchecked_sendable_outside_c_boundary']} outside DNSSD); "
              f"Task {{ }} {result['task_blocks']} (product code, bench and fuzz apart)")
        if result["machines"]:
            print("  machines: " + ", ".join(f"{name} {count}" for name, count in result["machines"].items()))
        print("  lines: " + ", ".join(f"{module} {count}" for module, count in result["lines_per_module"].items()))


if __name__ == "__main__":
    main()
