"""zerolab_nb.py — what the notebooks share: find the zerolab binary, run it, read what it writes.

The binary comes from one variable, ZEROLAB_BIN (a relative path is tried from the working
directory, then from the repository root); without it, ../build/release/zerolab relative to
this folder, else ../build/ci/zerolab. Every file a run writes (--summary, --metrics, --trace,
--save-final) goes to one temporary directory, removed when the kernel exits, never into the
repository. Figures use matplotlib's Agg backend, so the notebooks run without a display.
"""

import io
import json
import os
import pathlib
import subprocess
import tempfile

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 (after the backend is chosen)
from IPython.display import Image, display  # noqa: E402

NOTEBOOKS_DIR = pathlib.Path(__file__).resolve().parent
BUILD_HINT = ("build it with `cmake --preset release && cmake --build --preset release -j2` "
              "(or set ZEROLAB_BIN to a zerolab binary)")

_TMP = tempfile.TemporaryDirectory(prefix="zerolab-notebook-")
TMP_DIR = pathlib.Path(_TMP.name)
_runs = 0


class MissingBinary(RuntimeError):
    """The zerolab binary is not where ZEROLAB_BIN or the default build folders say."""


def find_binary():
    """Path of the zerolab binary: $ZEROLAB_BIN (absolute, or relative to the working directory or
    the repository root), else ../build/release/zerolab, else ../build/ci/zerolab."""
    chosen = os.environ.get("ZEROLAB_BIN")
    if chosen:
        # A relative path may be meant from the working directory or from the repository root
        # (`ZEROLAB_BIN=build/release/zerolab jupyter notebook notebooks/` runs the kernel in here).
        path = pathlib.Path(chosen).expanduser()
        candidates = [path] if path.is_absolute() else [pathlib.Path.cwd() / path,
                                                         NOTEBOOKS_DIR.parent / path]
        for candidate in candidates:
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate.resolve()
        raise MissingBinary(f"ZEROLAB_BIN={chosen} is not an executable file: {BUILD_HINT}")
    for build in ("release", "ci"):
        path = (NOTEBOOKS_DIR / ".." / "build" / build / "zerolab").resolve()
        if path.is_file() and os.access(path, os.X_OK):
            return path
    raise MissingBinary(f"no zerolab binary in build/release or build/ci: {BUILD_HINT}")


BIN = find_binary()


def flags(**options):
    """Command-line flags from keywords: stage=3 -> --stage 3, bf16=True -> --bf16; None and False
    are dropped."""
    out = []
    for key, value in options.items():
        if value is None or value is False:
            continue
        out.append("--" + key.replace("_", "-"))
        if value is not True:
            out.append(str(value))
    return out


def run(*args):
    """Runs `zerolab ARGS...` and returns its stdout; a failure raises with the command and its
    error line."""
    command = [str(BIN), *map(str, args)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(
            f"`{' '.join(command)}` exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def estimate(**options):
    """`zerolab estimate ... --json` as a dict (keys as `zerolab estimate --help` lists them)."""
    return json.loads(run("estimate", *flags(**options), "--json"))


class Run:
    """One `zerolab train` run: its --summary (dict), --metrics (list of dicts, one per step),
    --trace (dict, when asked for) and --save-final bytes (when asked for)."""

    def __init__(self, summary, metrics, trace, final_params, stdout):
        self.summary = summary
        self.metrics = metrics
        self.trace = trace
        self.final_params = final_params
        self.stdout = stdout

    def losses(self):
        """The logged loss of every step (the mean of the W micro-batch losses)."""
        return [m["loss"] for m in self.metrics]

    def grad_norms(self):
        """The canonical gradient norm of every step, before clipping."""
        return [m["grad_norm"] for m in self.metrics]

    def rank(self, r):
        """Rank r's part of the summary: {"bytes": memory ledger, "comm": traffic ledger, ...}."""
        return self.summary["ranks"][r]


def train(trace=False, save_final=False, **options):
    """Runs `zerolab train` with these flags (quiet), its files in the temporary directory, and
    reads what it wrote."""
    global _runs
    _runs += 1
    prefix = TMP_DIR / f"run{_runs:04d}"
    summary, metrics = f"{prefix}.summary.json", f"{prefix}.metrics.jsonl"
    trace_file = f"{prefix}.trace.json" if trace else None
    final_file = f"{prefix}.final.safetensors" if save_final else None
    stdout = run("train", *flags(**options), "--quiet", "--summary", summary, "--metrics", metrics,
                 *flags(trace=trace_file, save_final=final_file))
    with open(summary) as f:
        summary_doc = json.load(f)
    with open(metrics) as f:
        metric_lines = [json.loads(line) for line in f if line.strip()]
    trace_doc = None
    if trace_file:
        with open(trace_file) as f:
            trace_doc = json.load(f)
    final_bytes = pathlib.Path(final_file).read_bytes() if final_file else None
    for path in (summary, metrics, trace_file, final_file):
        if path:
            os.remove(path)
    return Run(summary_doc, metric_lines, trace_doc, final_bytes, stdout)


def ring_pass_sent_bytes(elems, elem_bytes, rank, world):
    """Bytes rank `rank` sends in one ring pass over `elems` elements, by the traffic ledger's
    rule: chunk c has floor(n/W) elements plus one for c < n mod W, and rank r never forwards chunk
    (r+1) mod W. An all_reduce is two passes; a reduce_scatter or all_gather (elems: the whole
    W-block buffer) is one."""
    skipped = (rank + 1) % world
    chunk = elems // world + (1 if skipped < elems % world else 0)
    return (elems - chunk) * elem_bytes


def tree_cover_nodes(first, count):
    """How many nodes optim/grad_norm.hpp's tree_cover gives leaves [first, first + count): the
    largest aligned power-of-two runs of leaves inside them, left to right."""
    nodes, end = 0, first + count
    while first < end:
        size = 1
        while first % (2 * size) == 0 and first + 2 * size <= end:
            size *= 2
        first += size
        nodes += 1
    return nodes


def norm_sums_per_rank(unit_numels, world):
    """Doubles each rank puts into the gradient norm's all_gather on `world` ranks
    (engines/sharding.hpp's norm_sums_per_rank): for each unit, padded to a multiple of world * 64
    elements, the most tree nodes any rank's shard of its 64-element blocks has."""
    total = 0
    for numel in unit_numels:
        multiple = world * 64
        blocks = max(1, -(-numel // multiple)) * multiple // multiple  # a shard's blocks
        total += max(tree_cover_nodes(r * blocks, blocks) for r in range(world))
    return total


def show(fig):
    """Puts a figure into the notebook's output as a PNG (drawn by Agg, so no display is needed)
    and closes it."""
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    display(Image(png.getvalue()))


def gb(n_bytes):
    """Bytes in GB (1 GB = 1e9 bytes, as `zerolab estimate` prints them)."""
    return n_bytes / 1e9
