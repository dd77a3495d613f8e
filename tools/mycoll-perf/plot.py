#!/usr/bin/env python3
"""Plots mycoll-perf results: bus bandwidth and time per size, mycoll beside its peer.

Reads the files mycoll-perf writes with --json FILE (JSON Lines, one object per
size) or -J FILE.json (one document: {"metadata": ..., "results": [...]}), any
number of them. One figure per (collective, ranks, memory, type, op, and the
"setting" key that docs/perf/ files add to name a variant): busbw
against size for mycoll (out of place) and for the peer timed beside it (NCCL
or MPI), time against size, and the ratio mycoll busbw / peer busbw.

  plot.py perf.jsonl -o allreduce.png          # PNG (needs matplotlib)
  plot.py docs/perf/gpu-h200-4gpus-*.jsonl -o fig.png   # several tables: one PNG each
  plot.py --text perf.jsonl                    # a text table, no matplotlib
  plot.py docs/perf/host-shm-2ranks-all-vs-mpi.jsonl --only collective=all_reduce \
      --median -o ar.png                       # one table: the median over its sweeps

--only KEY=VALUE keeps the rows whose KEY is VALUE (repeatable: all must hold).
--median merges the rows that differ only in "setting" (repeated sweeps) into
one table whose every value per size is the median over them.

Without matplotlib, or with --text, it prints the same series as text tables.
Only the result rows are read: a -J document's metadata (any version: with or
without "commit", best-of spelled -B or, before, -R) does not matter here.
"""

import argparse
import json
import math
import os
import statistics
import sys

PEERS = ("nccl", "mpi", "gloo")


def read_rows(path):
    """The result objects of one --json (JSON Lines) or -J (document) file."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    stripped = text.lstrip()
    if stripped.startswith("{") and '"results"' in stripped[:4096]:
        try:
            doc = json.loads(text)
            if isinstance(doc, dict) and isinstance(doc.get("results"), list):
                return doc["results"]
        except json.JSONDecodeError:
            pass  # JSON Lines whose first object merely mentions "results"
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise SystemExit(f"{path}:{n}: not JSON ({e})")
    return rows


def num(v):
    """A measured value, or None (null, missing, NaN)."""
    if v is None:
        return None
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) or math.isinf(v) else v


def peer_of(row):
    for p in PEERS:
        if p + "_busbw_gbs" in row:
            return p
    return None


def keep(rows, only):
    """The rows matching every KEY=VALUE of `only` (values compared as strings)."""
    conds = []
    for kv in only:
        k, sep, v = kv.partition("=")
        if not sep:
            raise SystemExit(f"plot.py: --only {kv}: not KEY=VALUE")
        conds.append((k, v))
    return [r for r in rows if all(k in r and str(r[k]) == v for k, v in conds)]


def median_rows(rows):
    """Rows of one table from several runs -> one row per size, each number the median."""
    by_size = {}
    for r in rows:
        by_size.setdefault(r["size"], []).append(r)
    out = []
    for size, rs in sorted(by_size.items()):
        m = dict(rs[0])
        for k in set().union(*rs):
            vals = [num(r.get(k)) for r in rs]
            vals = [v for v in vals if v is not None]
            if k != "size" and vals and isinstance(rs[0].get(k), (int, float)):
                m[k] = statistics.median(vals)
        out.append(m)
    return out


def group_rows(rows, median=False):
    """{(collective, nranks, mem, type, redop, setting): [row, ...] sorted by size}.

    median: rows differing only in "setting" form one table, the median per size
    (its setting names how many runs were merged).
    """
    groups = {}
    for r in rows:
        if "collective" not in r or "size" not in r:
            continue
        key = (r["collective"], r.get("nranks", 0), r.get("mem", "?"), r.get("type", "?"),
               r.get("redop", "none"), "" if median else r.get("setting", ""))
        groups.setdefault(key, []).append(r)
    if median:
        merged = {}
        for key, rs in groups.items():
            per_size = {}
            for r in rs:
                per_size[r["size"]] = per_size.get(r["size"], 0) + 1
            runs = max(per_size.values())
            label = f"median of {runs} runs" if runs > 1 else ""
            merged[key[:5] + (label,)] = median_rows(rs)
        groups = merged
    for v in groups.values():
        v.sort(key=lambda r: r["size"])
    return groups


def series(rows):
    """Per size: mycoll and peer busbw and time, and the ratio."""
    peer = next((p for p in map(peer_of, rows) if p), None)
    out = []
    for r in rows:
        out.append({
            "size": r["size"],
            "busbw": num(r.get("oop_busbw_gbs")),
            "time": num(r.get("oop_time_us")),
            "peer_busbw": num(r.get(f"{peer}_busbw_gbs")) if peer else None,
            "peer_time": num(r.get(f"{peer}_time_us")) if peer else None,
            "ratio": num(r.get("ratio")),
        })
    return peer, out


def title_of(key):
    coll, nranks, mem, dtype, redop, setting = key
    op = "" if redop == "none" else f" {redop}"
    return f"{coll}, {nranks} ranks, {mem} memory, {dtype}{op}" + (f": {setting}" if setting else "")


def human_size(b):
    for unit in ("", "K", "M", "G"):
        if b < 1024 or unit == "G":
            return f"{b:g}{unit}" if unit else f"{b}"
        b /= 1024
    return str(b)


def fmt(v, spec):
    return "N/A" if v is None else format(v, spec)


def print_text(groups, out=sys.stdout):
    for key, rows in sorted(groups.items(), key=lambda kv: [str(k) for k in kv[0]]):
        peer, pts = series(rows)
        out.write(f"# {title_of(key)}\n")
        head = f"{'size':>12}  {'time(us)':>10}  {'busbw(GB/s)':>11}"
        if peer:
            head += f"  {peer + ' time':>10}  {peer + ' busbw':>11}  {'ratio':>6}"
        out.write(head + "\n")
        for p in pts:
            line = f"{p['size']:>12}  {fmt(p['time'], '10.2f')}  {fmt(p['busbw'], '11.2f')}"
            if peer:
                line += (f"  {fmt(p['peer_time'], '10.2f')}  {fmt(p['peer_busbw'], '11.2f')}"
                         f"  {fmt(p['ratio'], '6.2f')}")
            out.write(line + "\n")
        out.write("\n")


def output_names(base, groups):
    """One PNG per group: base itself for one, base-<collective>-<n>... for several."""
    if len(groups) == 1:
        return {next(iter(groups)): base}
    stem, ext = os.path.splitext(base)
    names = {}
    for i, key in enumerate(sorted(groups, key=lambda k: [str(x) for x in k])):
        coll, nranks, mem, dtype, redop, setting = key
        tag = f"{coll}-{nranks}r-{mem}-{dtype}" + ("" if redop == "none" else f"-{redop}")
        if setting:
            tag += f"-{i}"  # settings are prose: number them (the title names them)
        names[key] = f"{stem}-{tag}{ext or '.png'}"
    return names


def plot_png(groups, base, plt):
    written = []
    for key, path in output_names(base, groups).items():
        peer, pts = series(groups[key])
        has_ratio = any(p["ratio"] is not None for p in pts)
        fig, axes = plt.subplots(3 if has_ratio else 2, 1, sharex=True,
                                 figsize=(7, 8 if has_ratio else 6))
        sizes = [max(p["size"], 1) for p in pts]

        def line(ax, field, label, style):
            xs = [s for s, p in zip(sizes, pts) if p[field] is not None]
            ys = [p[field] for p in pts if p[field] is not None]
            if xs:
                ax.plot(xs, ys, style, label=label)

        line(axes[0], "busbw", "mycoll", "o-")
        line(axes[1], "time", "mycoll", "o-")
        if peer:
            line(axes[0], "peer_busbw", peer.upper(), "s--")
            line(axes[1], "peer_time", peer.upper(), "s--")
        axes[0].set_ylabel("busbw (GB/s)")
        axes[1].set_ylabel("time (us)")
        axes[1].set_yscale("log")
        if has_ratio:
            line(axes[2], "ratio", f"mycoll / {peer.upper() if peer else 'peer'}", "o-")
            axes[2].axhline(1.0, color="gray", linewidth=0.8)
            axes[2].set_ylabel("busbw ratio")
        for ax in axes:
            ax.set_xscale("log", base=2)
            ax.grid(True, which="both", alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend()
        axes[-1].set_xlabel("size (bytes)")
        ticks = sizes if len(sizes) <= 12 else sizes[:: max(1, len(sizes) // 10)]
        axes[-1].set_xticks(ticks)
        axes[-1].set_xticklabels([human_size(t) for t in ticks], rotation=45)
        fig.suptitle(title_of(key))
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    return written


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", help="mycoll-perf --json or -J files")
    ap.add_argument("-o", "--output", default="mycoll-perf.png",
                    help="PNG to write (one per table: NAME-<collective>-... when several)")
    ap.add_argument("--text", action="store_true", help="print text tables, draw nothing")
    ap.add_argument("--only", action="append", default=[], metavar="KEY=VALUE",
                    help="keep rows whose KEY is VALUE (repeatable), e.g. collective=all_reduce")
    ap.add_argument("--median", action="store_true",
                    help="merge runs differing only in 'setting': the median per size")
    args = ap.parse_args(argv)

    rows = []
    for path in args.files:
        rows += read_rows(path)
    groups = group_rows(keep(rows, args.only), args.median)
    if not groups:
        print("plot.py: no mycoll-perf results in " + ", ".join(args.files), file=sys.stderr)
        return 1
    if args.text:
        print_text(groups)
        return 0
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot.py: matplotlib is not installed: text tables instead "
              "(pip install matplotlib for PNGs)", file=sys.stderr)
        print_text(groups)
        return 0
    for path in plot_png(groups, args.output, plt):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
