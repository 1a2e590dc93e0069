#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""tables.py: the numbers of the bench scripts, as tables.

contrib/bench.sh and contrib/harness/faults.sh measure and write CSV files into a
results directory (bench-results/); this program reads them, computes the
medians and ratios, and prints tables (markdown). Shell does the running,
this does the arithmetic (its helpers: tables_base.py, shared with
tables_mpi.py). Python 3, standard library only.

  contrib/bench/tables.py bench  DIR [--markdown FILE]...   bench.sh's tables
  contrib/bench/tables.py scale  DIR [--markdown FILE]...   its scale section's
  contrib/bench/tables.py mpi_scale DIR [--markdown FILE]... its mpi_scale
      section's (contrib/bench/tables_mpi.py)
  contrib/bench/tables.py faults DIR [--markdown FILE]...   faults.sh's table
  contrib/bench/tables.py check  DIR [--markdown FILE]...   check-example.sh's
      'syncmem-run --check' output (check.out, check.meta)
  contrib/bench/tables.py bench|scale DIR ... --plots DEST  also copies the
      run's plots (bandwidth.png, latency.png; scale.png) into DEST
      (doc/plots)
  contrib/bench/tables.py plot-data DIR OUTDIR   gnuplot's input from
      sweep.csv: OUTDIR/bw.T, lat.T, 'size median lowest highest' per line
  contrib/bench/tables.py plot-title DIR         the plots' run line
  contrib/bench/tables.py scale-plot-data DIR OUTDIR   gnuplot's input from
      scale.csv: OUTDIR/scale-data.T, 'N median lowest highest malloc'd'
      of the kB per endpoint; prints the transports
  contrib/bench/tables.py callgrind DIR                     callgrind.sh's tables
  contrib/bench/tables.py callgrind-count FILE FUNCTION OBJECT
      "CALLS TOTAL OWN" of one callgrind output file (callgrind.sh's row)

DIR holds what the scripts wrote:
  bench:  results.csv   test,transport,rep,value      (the main table)
          callgrind.csv op,transport,calls,instructions,own_instructions
          rcache.csv    size,rcache,rep,MBps; regcost.txt (regcost's output)
          passive.csv   api,op,slice_ms,transport,rep,median_us,p99_us,slowdown,compute
          sweep.csv     size,transport,rep,put_bw_MBps,put_lat_us
          scale.csv     transport,n,rep,rss_kb_per_ep,...,note (scale.c's
                        rows; scale -H); scale.info: what the devices allow
          mpi_scale.csv transport,np,rep,op,unit,median,max,note (mpi_scale.c's
                        lines); mpi_scale.info: where the ranks ran
          bench.meta    key=value: date, kernel, ucx, reps (written in the guest)
  faults: faults.csv    transport,scenario,ops_ok,...,ep_recreated
          faults.notes  transport<TAB>scenario<TAB>note (PASS/FAIL and why)
          faults.meta   key=value: date, kernel, ucx, kind, seconds
Sections whose file is missing are left out (a section bench.meta says ran
must have rows). Values 'nan' (a run that gave no number) are left out of
medians; an empty value is one no run was made for (passive's slowdown with
no computing). A cell measured in fewer runs than it had (bench.meta's reps
where it says them) says so: "19.0 (2 of 3)". A cell with runs of which
none gave a number is '-', and fails: it is named on stderr and the exit
status is 1 (the tables are still written).

Exit status: 0; 1 when there is nothing to show, a section or marked block
has no rows, or a cell has no measured run; 2 on a bad call.

Without --markdown the tables go to standard output. With --markdown FILE
(repeatable), FILE gets them: if FILE has marker lines

  <!-- BEGIN generated: bench tables -->     (the main job's tables)
  <!-- BEGIN generated: bench callgrind -->  (its instruction counts)
  <!-- BEGIN generated: bench summary -->    (the README's one table)
  <!-- BEGIN generated: bench scale -->      (the scale section's tables)
  <!-- BEGIN generated: bench mpi_scale -->  (the mpi_scale section's)
  <!-- BEGIN generated: faults table -->     (faults.sh's whole run)
  <!-- BEGIN generated: faults many -->      (its --many rows)
  <!-- END generated -->

only the text between a BEGIN and the next END is replaced (the rest of the
file, prose, stays), and a block of sections the run did not make
(bench.meta) is left as it is; a FILE without markers, or a new one, is
written whole with every table of that kind. Each block starts with a line that says when,
on which kernel and UCX the numbers were measured.
"""

import os
import re
import shutil
import statistics
import sys

import tables_mpi
from tables_base import (REFERENCE, Runs, fmt, fmt_ratio, median, num,
                         ordered, ratio, read_csv, read_meta, read_notes,
                         run_summary, stamp, table)

# --- bench.sh ---------------------------------------------------------------

# What each test of the main table is (bench.sh's names)
TESTS = {
    "put_lat": "put latency, 8 B short (usec)",
    "put_bw_64k_zcopy": "put bandwidth, 64 KiB zcopy (MB/s)",
    "get_64k_zcopy": "get bandwidth, 64 KiB zcopy (MB/s)",
    "put_mr_8b": "put message rate, 8 B short (msg/s)",
    "put_mr_8b_db16": "put message rate, 8 B short, batch 16 (msg/s)",
    "am_mr_8b": "AM message rate, 8 B short (msg/s)",
    "am_mr_8b_db16": "AM message rate, 8 B short, batch 16 (msg/s)",
    "add_mr": "atomic add message rate (msg/s)",
    "add_mr_db16": "atomic add message rate, batch 16 (msg/s)",
    "put_bw_4k_bcopy": "put bandwidth, 4 KiB bcopy (MB/s)",
    "get_4k_bcopy": "get bandwidth, 4 KiB bcopy (MB/s)",
    "am_lat": "AM latency, 8 B short (usec)",
    "am_bw_4k_bcopy": "AM bandwidth, 4 KiB bcopy (MB/s)",
    "am_bw_8k_zcopy": "AM bandwidth, 8 KiB zcopy (MB/s)",
    "add_lat": "atomic add latency (usec)",
    "fadd": "atomic fetch-add latency (usec)",
    "cswap": "atomic cswap latency (usec)",
    "ucp_put_lat": "UCP put latency, 8 B (usec)",
    "ucp_put_bw_64k": "UCP put bandwidth, 64 KiB (MB/s)",
    "ucp_get_64k": "UCP get bandwidth, 64 KiB (MB/s)",
    "ucp_fadd": "UCP fetch-add latency (usec)",
    "ucp_cswap": "UCP cswap latency (usec)",
    "tag_lat": "UCP tag latency, 8 B (usec)",
    "tag_bw_1m": "UCP tag bandwidth, 1 MiB (MB/s)",
}

# The README's one table: these rows of the main table, where measured
SUMMARY = ["put_lat", "put_bw_64k_zcopy", "get_64k_zcopy", "put_mr_8b",
           "am_lat", "am_bw_4k_bcopy", "fadd", "ucp_put_lat",
           "ucp_put_bw_64k", "ucp_fadd", "ucp_cswap", "tag_lat", "tag_bw_1m"]

def is_raw(transport):
    """rdma-core perftest tools (ib_write_bw, ...): the raw verbs column."""
    return transport.startswith("ib_")


def main_table(rows, runs, only=None):
    """bench.sh's main table: medians per test and transport, ratios of
    each transport to rc_verbs and of syncmem to raw verbs. Every transport
    runs every test, a raw verbs tool only some."""
    tls = [t for t in ordered(rows, "transport") if not is_raw(t)]
    others = [t for t in tls if t != REFERENCE]
    med, text = {}, {}
    for test in ordered(rows, "test"):
        for t in ordered(rows, "transport"):
            vals = [r["value"] for r in rows
                    if r["test"] == test and r["transport"] == t]
            if is_raw(t) and not vals:
                continue
            key = (test, "raw verbs" if is_raw(t) else t)
            med[key], mark = runs.median("main: %s %s" % (test, t), vals,
                                         expect=not is_raw(t))
            text[key] = "-" if med[key] is None else fmt(med[key]) + mark
    header = ["test"] + tls + ["raw verbs"]
    header += ["%s / %s" % (t, REFERENCE) for t in others if REFERENCE in tls]
    header += ["%s / raw verbs" % t for t in others[:1]]
    out = []
    for test in ordered(rows, "test"):
        if only is not None and test not in only:
            continue
        line = [TESTS.get(test, test)]
        line += [text.get((test, t), "-") for t in tls + ["raw verbs"]]
        if REFERENCE in tls:
            line += [fmt_ratio(ratio(med.get((test, t)), med.get((test, REFERENCE))))
                     for t in others]
        line += [fmt_ratio(ratio(med.get((test, t)), med.get((test, "raw verbs"))))
                 for t in others[:1]]
        out.append(line)
    if only is not None:
        order = {TESTS.get(t, t): i for i, t in enumerate(only)}
        out.sort(key=lambda l: order.get(l[0], 0))
    return table(header, out)


def callgrind_tables(rows, runs):
    """Instructions per call of each operation, per transport: all of them
    (the provider and libc below included) and the transport's own library
    alone; each with its ratios to rc_verbs. Two tables. (One run a cell,
    whatever the reps: a row of nan, or of 0 calls, is a run that failed.)"""
    tls = ordered(rows, "transport")
    others = [t for t in tls if t != REFERENCE]
    ref = REFERENCE in tls
    out = []
    for col in ("instructions", "own_instructions"):
        per, text = {}, {}
        for op in ordered(rows, "op"):
            for t in tls:
                vals = [ratio(num(r[col]), num(r["calls"])) for r in rows
                        if r["op"] == op and r["transport"] == t]
                per[op, t], mark = runs.median("callgrind: %s %s" % (op, t),
                                               vals, expect=False)
                text[op, t] = "-" if per[op, t] is None else \
                    "%.0f" % per[op, t] + mark
        header = ["operation"] + tls
        header += ["%s / %s" % (t, REFERENCE) for t in others if ref]
        lines = []
        for op in ordered(rows, "op"):
            line = [op] + [text[op, t] for t in tls]
            if ref:
                line += [fmt_ratio(ratio(per[op, t], per[op, REFERENCE]))
                         for t in others]
            lines.append(line)
        out.append(table(header, lines))
    return out


def callgrind_count(path, function, own):
    """(calls, total, own) of callgrind output PATH: the calls of FUNCTION
    and of its variants (names that start with it), all instructions
    collected (callgrind collected only inside FUNCTION), and those in an
    object whose name contains OWN (the transport's library). Names are
    compressed: "(12) name" defines id 12, a later "(12)" refers to it; ob
    and cob share one id space, fn and cfn another. A cost line is the
    positions ("positions:", line alone by default) then the costs, the
    first one instructions; one right after "calls=" is the inclusive cost
    of that call, not counted again."""
    names = {}

    def name(space, s):
        i = re.sub(r"\).*", "", s[1:] if s.startswith("(") else s)
        if re.search(r"\) ", s):
            names[space, i] = re.sub(r"^\([0-9]+\) ", "", s)
        return names.get((space, i), "")

    calls = total = mine = 0
    npos = 1
    ob = called = ""
    skip = False
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("positions:"):
                npos = len(line.split()) - 1
            elif line.startswith("summary:"):
                total = int(line.split()[1])
            elif line.startswith("ob="):
                ob = name("o", line[3:])
            elif line.startswith("cob="):
                name("o", line[4:])
            elif line.startswith("fn="):
                name("f", line[3:])
            elif line.startswith("cfn="):
                called = name("f", line[4:])
            elif line.startswith("calls="):
                if called.startswith(function):
                    calls += int(re.split(r"[= ]", line)[1])
                skip = True
            elif line[:1] and line[0] in "0123456789+*-":
                if skip:
                    skip = False
                elif own in ob and len(line.split()) > npos:
                    mine += int(line.split()[npos])
    return calls, total, mine


def size_name(n):
    n = int(n)
    for unit, s in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= s and n % s == 0:
            return "%d %s" % (n // s, unit)
    return "%d B" % n


REGCOST_COLUMNS = (("register", "register, cache off (usec)"),
                   ("cache hit", "cache hit (usec)"),
                   ("hit and pack", "hit + mkey_pack (usec)"),
                   ("hit and pack for invalidation",
                    "hit + mkey_pack for invalidation (usec)"),
                   ("invalidating dereg",
                    "... + invalidating dereg (usec)"))


def regcost_table(path, runs):
    """regcost's output: bytes, register_us, cache_hit_us, then (since the
    md packs keys for invalidation) hit_pack_us, hit_inv_us, inv_dereg_us
    a line ('' if it has no such line)."""
    out, ncols = [], 0
    with open(path) as f:
        for line in f:
            w = line.split()
            if len(w) in (3, 6) and w[0].isdigit():
                ncols = max(ncols, len(w) - 1)
                out.append([size_name(w[0])] + [
                    runs.fmt("regcost: %s %s" % (size_name(w[0]), what), [v],
                             expect=False)
                    for (what, _), v in zip(REGCOST_COLUMNS, w[1:])])
    if not out:
        return ""
    return table(["bytes"] + [h for _, h in REGCOST_COLUMNS[:ncols]],
                 [row + ["-"] * (ncols + 1 - len(row)) for row in out])


def rcache_table(rows, runs):
    out = []
    for size in ordered(rows, "size"):
        m, text = {}, {}
        for rc in ("y", "n"):
            m[rc], mark = runs.median(
                "rcache: %s rcache=%s" % (size_name(size), rc),
                [r["MBps"] for r in rows if r["size"] == size and r["rcache"] == rc])
            text[rc] = "-" if m[rc] is None else fmt(m[rc]) + mark
        out.append([size_name(size), text["y"], text["n"],
                    fmt_ratio(ratio(m["y"], m["n"]))])
    return table(["bytes", "UCP put MB/s, cache on", "cache off", "on / off"], out)


API = {"ucp": "UCP", "mpi": "MPI", "shmem": "OpenSHMEM"}
OP = {"fadd": "fetch-add", "cswap": "compare-swap", "swap": "swap"}


def passive_table(rows, runs):
    """Origin latency of atomics while the target computes in slices. (A
    pair that failed wrote no row: each transport should have every phase
    the others have, reps times.)"""
    tls = ordered(rows, "transport")
    others = [t for t in tls if t != REFERENCE]
    ref = REFERENCE in tls
    header = ["operation", "target slice"]
    header += ["median %s (usec)" % t for t in tls]
    header += ["/ %s" % REFERENCE for t in others if ref]
    header += ["p99 %s" % t for t in tls]
    header += ["/ %s" % REFERENCE for t in others if ref]
    header += ["slowdown %s" % t for t in tls]
    out = []
    keys = []
    for r in rows:
        k = (r["api"], r["slice_ms"], r["op"])
        if k not in keys:
            keys.append(k)
    for api, sl, op in keys:
        def vals(t, col):
            return [r[col] for r in rows
                    if (r["api"], r["slice_ms"], r["op"], r["transport"])
                    == (api, sl, op, t)]

        def m(t, col):
            return median(num(v) for v in vals(t, col))
        name = "passive: %s %s %s ms" % (api, op, sl)
        line = ["%s %s" % (API.get(api, api), OP.get(op, op)), "%s ms" % sl]
        line += [runs.fmt("%s %s" % (name, t), vals(t, "median_us")) for t in tls]
        if ref:
            line += [fmt_ratio(ratio(m(t, "median_us"), m(REFERENCE, "median_us")), 3)
                     for t in others]
        line += [runs.fmt("%s %s p99" % (name, t), vals(t, "p99_us")) for t in tls]
        if ref:
            line += [fmt_ratio(ratio(m(t, "p99_us"), m(REFERENCE, "p99_us")), 3)
                     for t in others]
        # (empty where the target does not compute, slice 0: no run)
        line += [runs.fmt("%s %s slowdown" % (name, t), vals(t, "slowdown"),
                          expect=sl != "0", form="%.3f") for t in tls]
        out.append(line)
    return table(header, out)


# bench.sh measures the sweep's latency up to this size; it writes nan above
SWEEP_LAT_MAX = 4096


def sweep_table(rows, runs):
    tls = ordered(rows, "transport")
    header = ["bytes"] + ["put MB/s %s" % t for t in tls] + \
        ["put usec %s" % t for t in tls]
    # (a sweep.csv of before the reps has no rep column: one run a cell)
    reps = "rep" in rows[0]
    out = []
    for size in ordered(rows, "size"):
        def cell(t, col):
            vals = [r[col] for r in rows if r["size"] == size and r["transport"] == t]
            unmeasured = col == "put_lat_us" and int(size) > SWEEP_LAT_MAX
            return runs.fmt("sweep: %s %s %s" % (size_name(size), t, col),
                            [] if unmeasured else vals,
                            expect=reps and not unmeasured)
        out.append([size_name(size)] + [cell(t, "put_bw_MBps") for t in tls] +
                   [cell(t, "put_lat_us") for t in tls])
    return table(header, out)


# The plots' files: (sweep.csv column, file prefix for plot-data, image)
PLOTS = [("put_bw_MBps", "bw", "bandwidth.png"), ("put_lat_us", "lat", "latency.png")]


def plot_data(d, outdir):
    """Writes OUTDIR/bw.TRANSPORT and lat.TRANSPORT for gnuplot from
    DIR/sweep.csv: 'size median lowest highest' of the reps' numbers, a
    line per size that has one; [what failed]."""
    rows = read_csv(os.path.join(d, "sweep.csv"))
    if not rows:
        return ["no sweep.csv with rows in %s" % d]
    points = 0
    for col, prefix, _ in PLOTS:
        for t in ordered(rows, "transport"):
            with open(os.path.join(outdir, "%s.%s" % (prefix, t)), "w") as f:
                for size in ordered(rows, "size"):
                    v = [x for x in (num(r[col]) for r in rows
                                     if r["size"] == size and r["transport"] == t)
                         if x is not None]
                    if v:
                        f.write("%s %g %g %g\n" % (size, statistics.median(v),
                                                     min(v), max(v)))
                        points += 1
    return [] if points else ["sweep.csv in %s has no number to plot" % d]


def plot_title(d):
    """The plots' second title line: the run, and what a point is."""
    meta = read_meta(os.path.join(d, "bench.meta"))
    reps = meta.get("reps", "1")
    # (two lines for gnuplot: the '\\n' is its newline)
    return ("run %s, commit %s, kernel %s, UCX %s\\n"
            "each point the median of %s runs, its bar from the lowest to the highest"
            % (meta.get("date", "?"), meta.get("commit", "?"),
               meta.get("kernel", "?"), meta.get("ucx", "?"), reps))


def copy_plots(d, dest, blocks):
    """Copies DIR's plots into DEST (doc/plots): the sweep's, and the scale
    section's where BLOCKS has its block; [what failed]."""
    errors = []
    os.makedirs(dest, exist_ok=True)
    meta = read_meta(os.path.join(d, "bench.meta"))
    images = [(image, "no sweep") for _, _, image in PLOTS
              if blocks.get("bench tables") and
              "sweep" in meta.get("sections", "sweep").split()]
    if blocks.get("bench scale"):
        images.append((SCALE_PLOT, "no scale section"))
    for image, why in images:
        src = os.path.join(d, image)
        if not os.path.exists(src):
            errors.append("%s: no %s (%s, or gnuplot failed)" % (d, image, why))
            continue
        shutil.copyfile(src, os.path.join(dest, image))
        print("tables.py: copied %s into %s" % (image, dest), file=sys.stderr)
    return errors


# What a whole bench.sh run makes (bench.meta's sections)
BENCH_SECTIONS = ["main", "callgrind", "rcache", "passive", "sweep"]


def bench_extent(ran, res):
    """'whole run', or 'partial run (what it lacked)': every section and
    every main test, or not (--only, --no-sweep)."""
    ran = ran if ran is not None else []
    tests = {r["test"] for r in res} if res else set()
    lacks = []
    if "main" in ran and len(tests & set(TESTS)) < len(TESTS):
        lacks.append("%d of %d main rows" % (len(tests & set(TESTS)),
                                             len(TESTS)))
    missing = [s for s in BENCH_SECTIONS if s not in ran]
    if missing:
        lacks.append("no " + ", ".join(missing))
    return "partial run (%s)" % "; ".join(lacks) if lacks else "whole run"


def bench_blocks(d):
    """({'bench tables': text, 'bench summary': text, 'bench scale': text},
    [what failed]) from DIR: the blocks there are rows for, and the
    sections and cells that could not be measured (a section the run made
    with no rows, a cell of runs none of which gave a number). A block of
    sections this run did not make (bench.meta) is None: not this run's,
    left as it is (the scale section's in a run without it, the others' in
    a run of the scale section alone)."""
    meta = read_meta(os.path.join(d, "bench.meta"))
    reps = meta.get("reps", "")
    runs = Runs(int(reps) if reps.isdigit() else None)
    # the sections this run measured (bench.meta); the other CSVs in DIR
    # are older runs'
    ran = meta["sections"].split() if "sections" in meta else None
    errors = []

    def section(name, filename):
        """The rows of FILENAME, None if the run did not make it; a
        section with no rows is an error."""
        if ran is not None and name not in ran:
            return None
        rows = read_csv(os.path.join(d, filename))
        if rows is None and ran is not None:
            errors.append("%s: bench.meta says it ran, and there is no %s"
                          % (name, filename))
        elif rows is not None and not rows:
            errors.append("%s: %s has no rows" % (name, filename))
        return rows or None

    parts, summary = [], ""
    res = section("main", "results.csv")
    if res:
        parts.append("#### ucx_perftest: syncmem, rc_verbs and raw verbs\n\n"
                     "Medians; latency in usec (lower is better), bandwidth in MB/s "
                     "and message rate in msg/s (higher is better). Ratios are "
                     "transport / other. UCP rows compare `UCX_TLS=syncmem` with "
                     "`UCX_TLS=rc_verbs,ud_verbs`; raw verbs is rdma-core's "
                     "perftest on the same device.\n\n" + main_table(res, runs))
        only = [t for t in SUMMARY if any(r["test"] == t for r in res)]
        if only:
            summary = main_table(res, runs, only)
    cg = section("callgrind", "callgrind.csv")
    cg_text = None
    if cg:
        cg_text = ("#### Instructions per call (callgrind)\n\n"
                   "User-space instructions per call of the transport's entry point, "
                   "everything below it included; own: the transport's library "
                   "alone. `syncmem`: its defaults (reconnect on); `syncmem_norc`: "
                   "`UCX_SYNCMEM_RECONNECT=n`; `syncmem_db16`: doorbell batching, "
                   "16 a doorbell.\n\n" +
                   "All instructions:\n\n%s\nOwn instructions:\n\n%s"
                   % tuple(callgrind_tables(cg, runs)))
    rc = os.path.join(d, "regcost.txt")
    if ran is None or "rcache" in ran:
        text = regcost_table(rc, runs) if os.path.exists(rc) else ""
        if text:
            parts.append("#### One registration (regcost)\n\n" + text)
        elif ran is not None or os.path.exists(rc):
            errors.append("rcache: no regcost.txt with a number (regcost failed?)")
    rcache = section("rcache", "rcache.csv")
    if rcache:
        parts.append("#### UCP put bandwidth, registration cache on and off\n\n" +
                     rcache_table(rcache, runs))
    passive = section("passive", "passive.csv")
    if passive:
        parts.append("#### Passive target: atomics while the target computes\n\n"
                     "Origin latency in usec; slowdown: the target's time for its "
                     "slices with the traffic over that without.\n\n" +
                     passive_table(passive, runs))
    sweep = section("sweep", "sweep.csv")
    plots = ""
    if sweep:
        parts.append("#### Message-size sweep\n\n"
                     "Put zcopy bandwidth and put bcopy latency; `ib_verbs` is "
                     "`ib_write_bw`/`ib_write_lat`. The plots (each point the "
                     "median of the runs, its bar from the lowest to the "
                     "highest):\n\n" + sweep_table(sweep, runs) +
                     "\n![put bandwidth vs message size](plots/bandwidth.png)\n"
                     "\n![put latency vs message size](plots/latency.png)\n")
        plots = ("\n![put bandwidth vs message size](doc/plots/bandwidth.png)\n\n"
                 "(This run's sweep: each point the median of its runs, the "
                 "bar from the lowest to the highest; the latency plot and "
                 "the sweep's table are in doc/benchmarks.md.)\n")
    # the head line, once the cells are known: whole or partial, what a
    # mark means, how many cells no run measured
    meta["run"] = run_summary(bench_extent(ran, res), reps, runs)
    head = stamp(meta, "contrib/bench.sh")
    errors += ["%s: %s" % kv for kv in runs.failed.items()]
    blocks = {}
    if parts:
        blocks["bench tables"] = head + "\n" + "\n".join(parts)
    if cg_text:
        blocks["bench callgrind"] = head + "\n" + cg_text
    if summary:
        blocks["bench summary"] = head + "\n" + summary + plots
    # a block of sections the run did not make is left as it was: the
    # main one's in a run of callgrind (or of the named sections) alone,
    # callgrind's in a run without it
    if ran is not None and not [s for s in ran
                                if s not in ("callgrind", "scale", "mpi_scale")]:
        blocks["bench tables"] = blocks["bench summary"] = None
    if ran is not None and "callgrind" not in ran:
        blocks["bench callgrind"] = None
    # the sections that run only when named: a run without one leaves its
    # block as it was
    for name, of in (("scale", scale_blocks), ("mpi_scale", mpi_scale_blocks)):
        if ran is None or name in ran:
            more_blocks, more = of(d, ran is not None)
            blocks.update(more_blocks)
            errors += more
        else:
            blocks["bench " + name] = None
    return blocks, errors


def mpi_scale_blocks(d, expected=True):
    """The mpi_scale section's block: contrib/bench/tables_mpi.py."""
    return tables_mpi.blocks(d, expected)


# --- bench.sh: the scale section -------------------------------------------

# A whole run of the scale section (contrib/bench/scale.c's rows in
# scale.csv): these transports at these endpoint counts
SCALE_TRANSPORTS = ["syncmem", "syncmem_norc", "rc_verbs"]
SCALE_N = [1, 16, 64, 256, 1024]
# scale.csv's columns, what each table is
SCALE_METRICS = [
    ("rss_kb_per_ep", "Resident memory per endpoint, once all are connected (kB)"),
    ("rss_traffic_kb_per_ep", "Resident memory per endpoint, after the latency "
     "and rate phases (kB)"),
    ("heap_kb_per_ep", "Allocated memory per endpoint (kB; malloc, resident or not)"),
    ("rss_idle_kb_per_ep", "Resident memory per endpoint, after 3 s without "
     "traffic (kB)"),
    ("heap_idle_kb_per_ep", "Allocated memory per endpoint, after 3 s without "
     "traffic (kB)"),
    ("connect_ms", "Time to connect all N: from the first endpoint created to "
     "the first put completed on each (ms)"),
    ("lat_med_us", "Put latency, median (usec; put_short of 8 B and a flush, "
     "each endpoint in turn)"),
    ("lat_p99_us", "Put latency, p99 (usec)"),
    ("rate_ops", "Message rate (put_short of 8 B per second, round-robin over "
     "all N)"),
]
SCALE_PLOT = "scale.png"


def scale_extent(rows):
    """'whole run', or 'partial run (what it lacked)': every transport of
    SCALE_TRANSPORTS at every N of SCALE_N."""
    tls = {r["transport"] for r in rows}
    ns = {int(r["n"]) for r in rows if r["n"].isdigit()}
    lacks = ["no %s" % ", ".join(t for t in SCALE_TRANSPORTS if t not in tls)]
    lacks += ["no N = %s" % ", ".join(str(n) for n in SCALE_N if n not in ns)]
    lacks = [l for l in lacks if not l.endswith("= ") and l != "no "]
    return "partial run (%s)" % "; ".join(lacks) if lacks else "whole run"


def scale_tables(rows, runs):
    """A table per metric: N down, transports across, their medians (a
    cell none of whose runs gave a number is '-', and fails), and the
    ratios to rc_verbs."""
    tls = ordered(rows, "transport")
    others = [t for t in tls if t != REFERENCE]
    ref = REFERENCE in tls
    header = ["N"] + tls + ["%s / %s" % (t, REFERENCE) for t in others if ref]
    ns = sorted(ordered(rows, "n"), key=lambda n: int(n) if n.isdigit() else 0)
    out = []
    for col, title in SCALE_METRICS:
        lines = []
        for n in ns:
            med, line = {}, [n]
            for t in tls:
                med[t], mark = runs.median(
                    "scale: %s N=%s %s" % (col, n, t),
                    [r[col] for r in rows if r["n"] == n and r["transport"] == t])
                line.append("-" if med[t] is None else fmt(med[t]) + mark)
            if ref:
                line += [fmt_ratio(ratio(med[t], med[REFERENCE])) for t in others]
            lines.append(line)
        out.append("%s:\n\n%s" % (title, table(header, lines)))
    return "\n".join(out)


def scale_blocks(d, expected=True):
    """({'bench scale': text}, [what failed]) from DIR/scale.csv (with
    bench.meta's run and scale.info's lines: what the devices allow). No
    scale.csv is an error when EXPECTED, one with no rows always; so is a
    cell none of whose runs gave a number. Rows with a nan are listed with
    their notes (why)."""
    rows = read_csv(os.path.join(d, "scale.csv"))
    if not rows:
        if rows is None and not expected:
            return {"bench scale": None}, []
        return {}, ["scale: %s" % ("no scale.csv in %s" % d if rows is None
                                   else "scale.csv has no rows")]
    meta = read_meta(os.path.join(d, "bench.meta"))
    reps = meta.get("reps", "")
    runs = Runs(int(reps) if reps.isdigit() else None)
    text = ("#### Endpoints per worker: memory, connection time, latency "
            "and rate\n\n"
            "One worker's iface connects N endpoints to a peer iface (on the "
            "same port in bench.sh's guest; `contrib/bench/scale.c`, each N in "
            "a process of its own); the peer is in the same process, so memory "
            "is that of both ends of each connection. `syncmem_norc`: "
            "`UCX_SYNCMEM_RECONNECT=n`. Medians; ratios are transport / "
            "rc_verbs.\n\n" + scale_tables(rows, runs) +
            "\n![memory per endpoint against N](plots/%s)\n" % SCALE_PLOT)
    bad = [r for r in rows if any(num(r.get(c)) is None for c, _ in SCALE_METRICS)]
    if bad:
        text += ("\nNot measured (nan in scale.csv), and why:\n\n" +
                 "".join("- %s, N = %s, rep %s: %s\n"
                         % (r["transport"], r["n"], r.get("rep") or "1",
                            r.get("note") or "no reason given") for r in bad))
    info = os.path.join(d, "scale.info")
    if os.path.exists(info):
        with open(info) as f:
            lines = [l.strip().lstrip("# ") for l in f if l.strip()]
        if lines:
            text += ("\nWhat the devices allow (`ibv_query_device`): %s.\n"
                     % "; ".join(lines))
    meta["run"] = run_summary(scale_extent(rows), reps, runs)
    return ({"bench scale": stamp(meta, "contrib/bench.sh") + "\n" + text},
            ["%s: %s" % kv for kv in runs.failed.items()])


def scale_plot_data(d, outdir):
    """Writes OUTDIR/scale-data.TRANSPORT for gnuplot from DIR/scale.csv:
    'N median lowest highest' of the resident kB per endpoint, then the
    median malloc'd kB (NaN: none), a line per N that has a median above 0
    (the plot's scale is logarithmic); ([transports], [what failed])."""
    rows = read_csv(os.path.join(d, "scale.csv"))
    if not rows:
        return [], ["no scale.csv with rows in %s" % d]
    tls = []
    for t in ordered(rows, "transport"):
        lines = []
        for n in sorted(ordered(rows, "n"), key=lambda n: int(n) if n.isdigit() else 0):
            mine = [r for r in rows if r["n"] == n and r["transport"] == t]
            rss = [x for x in (num(r["rss_kb_per_ep"]) for r in mine) if x is not None]
            heap = median(num(r["heap_kb_per_ep"]) for r in mine)
            if rss and statistics.median(rss) > 0:
                lines.append("%s %g %g %g %s\n" % (
                    n, statistics.median(rss), min(rss), max(rss),
                    "%g" % heap if heap is not None and heap > 0 else "NaN"))
        if lines:
            with open(os.path.join(outdir, "scale-data.%s" % t), "w") as f:
                f.writelines(lines)
            tls.append(t)
    return tls, [] if tls else ["scale.csv in %s has no number to plot" % d]


# --- faults.sh --------------------------------------------------------------

FAULT_COLUMNS = ["transport", "scenario", "ops_ok", "ops_failed", "lost",
                 "duplicated", "corrupted", "reconnects", "hang",
                 "recovery_ms", "ep_recreated"]


def faults_blocks(d):
    """({'faults table' or 'faults many': text, the other: None}, [what
    failed]) from DIR: a --many run's rows (flap_0.5s_nN) have a block of
    their own, so that they do not replace the whole run's table."""
    rows = read_csv(os.path.join(d, "faults.csv"))
    if rows is None:
        return {}, []
    if not rows:
        return {}, ["faults.csv has no rows"]
    meta = read_meta(os.path.join(d, "faults.meta"))
    if meta.get("kind"):
        # the full run is the whole bench; --quick, --soak, --many are parts
        meta["run"] = ("whole run" if meta["kind"] == "full" else
                       "partial run (--%s)" % ("soak" if meta["kind"] == "soak"
                                               else meta["kind"]))
    notes = read_notes(os.path.join(d, "faults.notes"))
    cols = [c for c in FAULT_COLUMNS if rows and c in rows[0]]
    header = cols + (["verdict"] if notes else [])
    out = []
    for r in rows:
        line = [r[c] for c in cols]
        if notes:
            # (paths relative to the tree, as the doc is read anywhere)
            note = notes.get((r["transport"], r["scenario"]), "")
            line.append(re.sub(r"\S*/(bench-results/)", r"\1", note).replace("|", "/"))
        out.append(line)
    name, other = (("faults many", "faults table") if meta.get("kind") == "many"
                   else ("faults table", "faults many"))
    return {name: stamp(meta, "contrib/harness/faults.sh") + "\n" +
            table(header, out), other: None}, []


# --- check-example.sh ---------------------------------------------------------

def check_blocks(d):
    """({'check example': text}, [what failed]) from DIR/check.out: the
    check's output with the lines that passed left out (one '  ...' where
    they were), but the memory lock's."""
    path = os.path.join(d, "check.out")
    if not os.path.exists(path):
        return {}, []
    with open(path) as f:
        lines = f.read().rstrip("\n").split("\n")
    if not any(re.match(r"syncmem check: (all \d+ checks passed|"
                        r"\d+ of \d+ checks failed)$", line) for line in lines):
        return {}, ["check.out has no 'syncmem check:' summary line"]
    out, section = [], ""
    for line in lines:
        if line and not line.startswith(" "):
            section = line
        if line.startswith("  ok    ") and section != "memlock":
            if out[-1:] != ["  ..."]:
                out.append("  ...")
            continue
        out.append(line)
    meta = read_meta(os.path.join(d, "check.meta"))
    meta["run"] = "whole run"
    return {"check example": stamp(meta, "contrib/bench/check-example.sh") +
            "\n```\n" + "\n".join(out) + "\n```\n"}, []


# --- output -----------------------------------------------------------------

BEGIN = re.compile(r"^<!-- BEGIN generated: (.+?) -->\s*$")
END = "<!-- END generated -->"


def splice(text, blocks):
    """TEXT with each marked block replaced; (text, how many replaced)."""
    out, n, lines, i = [], 0, text.split("\n"), 0
    while i < len(lines):
        m = BEGIN.match(lines[i])
        out.append(lines[i])
        i += 1
        if not m or m.group(1) not in blocks:
            continue
        j = i
        while j < len(lines) and lines[j].strip() != END:
            j += 1
        if j == len(lines):
            raise SystemExit("tables.py: '%s' has no '%s' after it" %
                             (m.group(0), END))
        out.append(blocks[m.group(1)].rstrip("\n"))
        i = j
        n += 1
    return "\n".join(out), n


def markers(text):
    """The names of TEXT's BEGIN markers."""
    return [m.group(1) for m in map(BEGIN.match, text.split("\n")) if m]


# The blocks of each kind (a marker of another kind is not this run's)
KINDS = {"bench": ["bench tables", "bench callgrind", "bench summary",
                   "bench scale", "bench mpi_scale"],
         "scale": ["bench scale"], "mpi_scale": ["bench mpi_scale"],
         "faults": ["faults table", "faults many"],
         "check": ["check example"]}
# What a file without markers (or standard output) gets of each kind
WHOLE = {"bench": ["bench tables", "bench callgrind", "bench scale",
                   "bench mpi_scale"],
         "faults": ["faults table", "faults many"]}


def whole_text(kind, blocks):
    """KIND's BLOCKS as one text, None if there are none."""
    texts = [blocks[k] for k in WHOLE.get(kind, KINDS[kind][:1]) if blocks.get(k)]
    return "\n".join(texts) if texts else None


def write_markdown(path, kind, blocks):
    """Writes KIND's BLOCKS into PATH (between its markers, or whole);
    [what failed]: a marker of KIND with no block (no rows for it; a block
    that is None is not this run's, and left as it is without a word), a
    file with markers and none of KIND, a table with no rows."""
    errors, whole = [], whole_text(kind, blocks)
    old = None
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
    if old is not None and markers(old):
        mine = [m for m in markers(old) if m in KINDS[kind]]
        if not mine:
            return ["%s has no marker for the %s tables; unchanged" % (path, kind)]
        errors += ["%s: no rows for its '%s' block; that block left as it was"
                   % (path, m) for m in mine if m not in blocks]
        new, n = splice(old, {k: v for k, v in blocks.items() if v is not None})
        if n == 0:
            # (faults: a run's one block, which this file has no marker for)
            ours = [k for k, v in blocks.items() if v is not None]
            return errors + (["%s has no marker for the '%s' block; unchanged"
                              % (path, ours[0])]
                             if kind == "faults" and ours else [])
    elif whole is None:
        return ["no rows for %s; not written" % path]
    else:
        new = whole
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(new)
    os.replace(tmp, path)
    print("tables.py: wrote the %s tables into %s" % (kind, path), file=sys.stderr)
    return errors


def failed(errors):
    """Says ERRORS on stderr; the exit status."""
    for e in errors:
        print("tables.py: FAIL: %s" % e, file=sys.stderr)
    return 1 if errors else 0


def main(argv):
    if len(argv) > 1 and argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if len(argv) == 5 and argv[1] == "callgrind-count":
        print("%d %d %d" % callgrind_count(argv[2], argv[3], argv[4]))
        return 0
    if len(argv) == 3 and argv[1] == "callgrind":
        rows = read_csv(os.path.join(argv[2], "callgrind.csv"))
        if not rows:
            print("tables.py: no callgrind.csv with rows in %s" % argv[2],
                  file=sys.stderr)
            return 1
        runs = Runs()
        sys.stdout.write("All instructions per call:\n\n%s\n"
                         "Own instructions per call:\n\n%s"
                         % tuple(callgrind_tables(rows, runs)))
        return failed(["%s: %s" % kv for kv in runs.failed.items()])
    if len(argv) == 4 and argv[1] == "plot-data":
        return failed(plot_data(argv[2], argv[3]))
    if len(argv) == 3 and argv[1] == "plot-title":
        print(plot_title(argv[2]))
        return 0
    if len(argv) == 4 and argv[1] == "scale-plot-data":
        tls, errors = scale_plot_data(argv[2], argv[3])
        print("\n".join(tls))
        return failed(errors)
    if len(argv) < 3 or argv[1] not in KINDS:
        print("usage: tables.py bench|scale|mpi_scale|faults|check DIR [--markdown FILE]... "
              "[--plots DEST] (--help)",
              file=sys.stderr)
        return 2
    kind, d, files, plots = argv[1], argv[2], [], None
    rest = argv[3:]
    while rest:
        if rest[0] == "--markdown" and len(rest) > 1:
            files.append(rest[1])
            rest = rest[2:]
        elif rest[0] == "--plots" and len(rest) > 1 and kind in ("bench", "scale"):
            plots = rest[1]
            rest = rest[2:]
        else:
            print("tables.py: unknown argument %s" % rest[0], file=sys.stderr)
            return 2
    blocks, errors = {"bench": bench_blocks, "scale": scale_blocks,
                      "mpi_scale": mpi_scale_blocks, "faults": faults_blocks,
                      "check": check_blocks}[kind](d)
    if not any(blocks.values()) and not errors:
        print("tables.py: no %s results in %s" % (kind, d), file=sys.stderr)
        return 1
    if not files:
        sys.stdout.write(whole_text(kind, blocks) or "")
    for path in files:
        errors += write_markdown(path, kind, blocks)
    if plots:
        errors += copy_plots(d, plots, blocks)
    return failed(errors)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
