#!/usr/bin/env python3
"""check_layers.py — the rule of the floors: a file of zerolab's library, simulator or lessons may
include headers of its own part and of parts on lower floors, never of a part on its own floor or
above. Prints every include that breaks the rule (file:line, the two parts and their floors) and
exits 1; exits 0 with a one-line summary when there is none. docs/architecture.md draws the floors.

usage: scripts/check_layers.py [SOURCE_DIR]   (default: the repository holding this script)
"""
import os
import re
import sys

# Floors from the bottom. A part is a folder; the most specific folder that holds a file names its
# part (src/comm/mpi is the MPI backend, not the Comm interface of src/comm). The engines and the
# simulator share a floor, so neither sees the other: engines know only Comm and Device. The
# process backends sit above the simulator, whose call checks and timeline they reuse.
FLOORS = [
    ["src/core"],
    ["src/optim", "src/comm"],
    ["src/ops"],
    ["src/model"],
    ["src/engines", "sim"],
    ["src/comm/mpi", "src/comm/nccl", "sim/cuda"],
    ["src/ckpt"],
    ["src/run"],
    ["src/bench"],
    ["src/cli", "lessons"],
]
FLOOR_OF = {part: floor for floor, parts in enumerate(FLOORS) for part in parts}
# Where a quoted include is looked up after the including file's own folder: the include
# directories the CMake targets publish (src/, sim/, lessons/).
SEARCH = ["src", "sim", "lessons"]
SOURCE = re.compile(r"\.(cpp|hpp|cu|cuh)$")
INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"')


def part_of(path):
    """The most specific part whose folder holds `path` (relative to the root), or None."""
    folder = os.path.dirname(path)
    while folder:
        if folder in FLOOR_OF:
            return folder
        folder = os.path.dirname(folder)
    return None


def resolve(root, including, name):
    """The root-relative path of header `name` included from `including`, or None (a system or
    third-party header)."""
    for base in [os.path.dirname(including)] + SEARCH:
        candidate = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(root, candidate)):
            return candidate
    return None


def violations(root):
    found, files = [], 0
    for top in SEARCH:
        for folder, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not SOURCE.search(name):
                    continue
                path = os.path.relpath(os.path.join(folder, name), root)
                part = part_of(path)
                if part is None:
                    continue
                files += 1
                with open(os.path.join(root, path), encoding="utf-8") as source:
                    for number, line in enumerate(source, 1):
                        match = INCLUDE.match(line)
                        target = match and resolve(root, path, match.group(1))
                        other = target and part_of(target)
                        if not other or other == part or FLOOR_OF[other] < FLOOR_OF[part]:
                            continue
                        found.append(
                            f"{path}:{number}: includes {target}: {part} (floor {FLOOR_OF[part]}) "
                            f"may not include {other} (floor {FLOOR_OF[other]}); move the code "
                            f"that needs it up a floor, or what it needs down")
    return found, files


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    found, files = violations(os.path.abspath(root))
    for line in found:
        print(line)
    if found:
        print(f"check_layers: {len(found)} include(s) break the rule of the floors "
              f"(docs/architecture.md)")
        return 1
    print(f"check_layers: {files} files, every include points to the same part or a lower floor")
    return 0


if __name__ == "__main__":
    sys.exit(main())
