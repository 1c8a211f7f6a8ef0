"""Where each thread of a training run spends its wall time, from a py-spy raw profile.

``py-spy record --subprocesses --threads --idle -f raw`` samples every thread of the driver,
the nannies and the workers, busy or not; a nogil numba kernel shows as the Python line that
called it. This prints, per process and thread with at least ``--min-share`` of the samples,
its share of the samples and the frames it was most often in (innermost first), so a
layout's clock can be read thread by thread: the sampling threads' sweep against their
waits at pass boundaries, the doc LL, the push, the actor and event-loop threads.

    py-spy record --subprocesses --threads --idle -r 20 -f raw -d 40 -o profile.txt -- \\
        python -m biglda.cli train CORPUS -k 1000 --iterations 20 --sampler warplda \\
        --workers 1 --threads-per-worker 16 --out model.zarr
    python pipelines/pyspy_threads.py profile.txt

``pipelines/device_scale_out.sh`` does both where ``PROFILE`` names a layout.
"""

from __future__ import annotations

import argparse
import collections
import re
import sys

_THREAD = re.compile(r"^thread \((\d+)\)(?::\s*(.*))?$")
#: Innermost frames of a thread that waits for work (a queue, a select, a lock, a child).
IDLE = ("Condition.wait", "EpollSelector.select", "_worker", "Popen.poll", "Connection._recv",
        "ThreadedChildWatcher._do_waitpid", "_watch", "Queue.get", "Event.wait")


def busy_share(frames: collections.Counter) -> float:
    """Share of a thread's samples not in an :data:`IDLE` frame.

    >>> busy_share(collections.Counter({"Condition.wait < Queue.get": 3, "sweep": 1}))
    0.25
    """
    n = sum(frames.values())
    idle = sum(k for path, k in frames.items() if path.split(" < ")[0] in IDLE)
    return (n - idle) / n if n else 0.0


def parse(lines: list[str]) -> dict[tuple[str, str], collections.Counter]:
    """Return ``{(process, thread): Counter(frame path -> samples)}`` from raw lines.

    A raw line is ``frame;frame;...;frame COUNT``, outermost first, with the process and the
    thread among the first frames.

    Examples
    --------
    >>> got = parse(['process 7:"python x";thread (8): main;run (a.py:1);sweep (b.py:2) 5',
    ...              'process 7:"python x";thread (8): main;run (a.py:1) 2'])
    >>> {k: dict(v) for k, v in got.items()}
    {('7', '8 main'): {'sweep < run': 5, 'run': 2}}
    """
    out: dict[tuple[str, str], collections.Counter] = collections.defaultdict(
        collections.Counter)
    for line in lines:
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        parts = stack.split(";")
        at = [i for i, p in enumerate(parts) if _THREAD.match(p)]
        if not at:
            continue
        i = at[-1]
        proc = next((p.split(":", 1)[0].removeprefix("process ")
                     for p in reversed(parts[:i]) if p.startswith("process ")), "?")
        tid, name = _THREAD.match(parts[i]).groups()  # type: ignore[union-attr]
        frames = [p.split(" (", 1)[0] for p in parts[i + 1:]]
        path = " < ".join(reversed(frames[-3:])) or "(no Python frame)"
        out[(proc, f"{tid} {name or ''}".strip())][path] += int(count)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profile")
    ap.add_argument("--min-busy", type=float, default=0.05,
                    help="threads busy (not in an idle frame) in at least this share of "
                         "their samples")
    ap.add_argument("--frames", type=int, default=4)
    args = ap.parse_args(argv)
    with open(args.profile) as f:
        threads = parse(f.read().splitlines())
    if not threads:
        print(f"{args.profile}: no samples", file=sys.stderr)
        return 1
    for (proc, thread), frames in sorted(threads.items(), key=lambda kv: -busy_share(kv[1])):
        n, busy = sum(frames.values()), busy_share(frames)
        if busy < args.min_busy:
            continue
        print(f"process {proc}, thread {thread}: {n} samples, {100 * busy:.1f}% busy")
        for path, k in frames.most_common(args.frames):
            print(f"  {100 * k / n:5.1f}%  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
