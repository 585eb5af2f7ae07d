"""Write tests/durations.json from the ``--durations=0`` report of a pytest run.

    make test-durations   (runs make test's selection with --durations=0, then this script)

tests/conftest.py reads the file to hand the longest test files out first under
``--dist loadfile``; the numbers only order the files, so a stale file costs balance, not results.
"""
from __future__ import annotations

import collections
import json
import re
import sys
from pathlib import Path

LINE = re.compile(r"\s*([\d.]+)s (?:call|setup|teardown)\s+(\S+)")


def file_seconds(report: str) -> dict:
    """Seconds per test file, summed over the call, setup and teardown lines of ``report``."""
    totals = collections.Counter()
    for line in report.splitlines():
        match = LINE.match(line)
        if match:
            totals[match.group(2).split("::")[0]] += float(match.group(1))
    return {name: round(seconds, 1) for name, seconds in totals.most_common() if seconds >= 1.0}


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: record_test_durations.py PYTEST_OUTPUT tests/durations.json", file=sys.stderr)
        return 2
    seconds = file_seconds(Path(args[0]).read_text(encoding="utf-8", errors="replace"))
    if not seconds:
        print(f"{args[0]}: no --durations lines found; run pytest with --durations=0", file=sys.stderr)
        return 2
    data = {"about": "seconds per test file in `make test` from a fresh clone (cold numba cache, 2 workers): "
                     "tests/conftest.py hands the longest files out first so that both workers finish together; "
                     "refresh with `make test-durations`",
            "seconds": seconds}
    Path(args[1]).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"{args[1]}: {len(seconds)} files, {sum(seconds.values()):.0f} s in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
