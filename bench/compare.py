"""Compares two runs of a benchmark (`scripts/bench.sh NAME --json > run.json`): every figure the two
have in common, old, new and new / old, one per line. Lists of runs are shown as their median.

Usage: python3 bench/compare.py OLD.json NEW.json   (or: scripts/bench.sh compare OLD.json NEW.json)"""
import json
import sys

from figures import median


def figures(value, prefix=""):
    """The numeric figures of a benchmark's JSON, by dotted path (a list of numbers: its median)."""
    if isinstance(value, bool):
        return {}
    if isinstance(value, (int, float)):
        return {prefix: float(value)}
    if isinstance(value, list) and value and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return {prefix + " (median)": float(median(value))}
    if isinstance(value, dict):
        found = {}
        for key, inner in value.items():
            found.update(figures(inner, f"{prefix}.{key}" if prefix else str(key)))
        return found
    return {}


def table(old, new):
    """Lines of `figure  old  new  new/old` for the figures both runs have."""
    a, b = figures(old), figures(new)
    common = [key for key in a if key in b]
    if not common:
        return ["the two runs have no figure in common (not the same benchmark?)"]
    width = max(len(key) for key in common)
    lines = [f"{'figure'.ljust(width)}  {'old':>12}  {'new':>12}  {'new/old':>8}"]
    for key in common:
        ratio = f"{b[key] / a[key]:.2f}x" if a[key] else "-"
        lines.append(f"{key.ljust(width)}  {a[key]:>12.4g}  {b[key]:>12.4g}  {ratio:>8}")
    only = sorted(set(a) ^ set(b))
    if only:
        lines.append(f"(in one run only: {', '.join(only)})")
    return lines


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: compare.py OLD.json NEW.json")
    runs = []
    for path in sys.argv[1:]:
        try:
            with open(path) as handle:
                runs.append(json.load(handle))
        except (OSError, json.JSONDecodeError) as error:
            sys.exit(f"compare: cannot read {path}: {error}")
    print("\n".join(table(*runs)))


if __name__ == "__main__":
    main()
