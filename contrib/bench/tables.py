#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""tables.py: the numbers of the bench scripts, as tables.

contrib/bench.sh and contrib/harness/faults.sh measure and write CSV files into a
results directory (bench-results/); this program reads them, computes the
medians and ratios, and prints tables (markdown). Shell does the running,
this does the arithmetic. This file is the command line, the markdown
blocks and their assembly; each section's tables are in a module of its
own (tables_perftest.py: the main table, callgrind, registration, sweep;
tables_passive.py; tables_tag_bw.py: ucp_tag_bw; tables_scale.py;
tables_mpi.py: mpi_scale), all on tables_base.py's helpers. A section
with a block of its own is an entry of OWN_BLOCKS in this file. Python 3, standard library only.

  contrib/bench/tables.py bench  DIR [--markdown FILE]...   bench.sh's tables
  contrib/bench/tables.py scale  DIR [--markdown FILE]...   its scale section's
  contrib/bench/tables.py mpi_scale DIR [--markdown FILE]... its mpi_scale
      section's
  contrib/bench/tables.py ucp_tag_bw DIR [--markdown FILE]... its ucp_tag_bw
      section's
  contrib/bench/tables.py gups DIR [--markdown FILE]...  its gups
      section's random updates
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
          gups.csv      api,op,target,transport,atomic_mode,rep,window,rate
          sweep.csv     size,transport,rep,put_bw_MBps,put_lat_us
          ucp_tag_bw.csv transport,size,mode,rep,MBps,note (ucp_tag_bw.c's
                        lines)
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
  <!-- BEGIN generated: bench ucp_tag_bw --> (the ucp_tag_bw section's)
  <!-- BEGIN generated: bench scale -->      (the scale section's tables)
  <!-- BEGIN generated: bench mpi_scale -->  (the mpi_scale section's)
  <!-- BEGIN generated: bench gups -->       (the passive section's random updates)
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
import sys

import tables_gups
import tables_mpi
import tables_scale
import tables_tag_bw
from tables_base import (Runs, read_csv, read_meta, read_notes, run_summary,
                         stamp, table)
from tables_passive import passive_table
from tables_perftest import (PLOTS, SUMMARY, TESTS, callgrind_count,
                             callgrind_tables, main_table, plot_data,
                             plot_title, rcache_table, regcost_table,
                             sweep_table)

# --- bench.sh ---------------------------------------------------------------

# What a whole bench.sh run makes (bench.meta's sections)
BENCH_SECTIONS = ["main", "callgrind", "rcache", "passive", "ucp_tag_bw",
                  "sweep"]

# bench.sh's sections whose tables are a block of their own ('bench NAME')
# and a kind of their own ('tables.py NAME DIR'), each from its module's
# blocks(DIR, expected): ({'bench NAME': text}, [what failed]), EXPECTED
# when bench.meta says the section ran (then no CSV is an error)
OWN_BLOCKS = {"gups": tables_gups, "ucp_tag_bw": tables_tag_bw,
              "scale": tables_scale, "mpi_scale": tables_mpi}


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
        images.append((tables_scale.SCALE_PLOT, "no scale section"))
    for image, why in images:
        src = os.path.join(d, image)
        if not os.path.exists(src):
            errors.append("%s: no %s (%s, or gnuplot failed)" % (d, image, why))
            continue
        shutil.copyfile(src, os.path.join(dest, image))
        print("tables.py: copied %s into %s" % (image, dest), file=sys.stderr)
    return errors


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
    # main one's in a run of callgrind (or of the sections with blocks of
    # their own) alone, callgrind's in a run without it
    if ran is not None and not [s for s in ran
                                if s != "callgrind" and s not in OWN_BLOCKS]:
        blocks["bench tables"] = blocks["bench summary"] = None
    if ran is not None and "callgrind" not in ran:
        blocks["bench callgrind"] = None
    # the sections with a block of their own: a run without one leaves its
    # block as it was
    for name, module in OWN_BLOCKS.items():
        if ran is None or name in ran:
            more_blocks, more = module.blocks(d, ran is not None)
            blocks.update(more_blocks)
            errors += more
        else:
            blocks["bench " + name] = None
    return blocks, errors


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
KINDS = {"bench": ["bench tables", "bench callgrind", "bench summary"] +
         ["bench " + name for name in OWN_BLOCKS]}
KINDS.update({name: ["bench " + name] for name in OWN_BLOCKS})
KINDS.update({"faults": ["faults table", "faults many"],
              "check": ["check example"]})
# What a file without markers (or standard output) gets of each kind
WHOLE = {"bench": ["bench tables", "bench callgrind"] +
         ["bench " + name for name in OWN_BLOCKS],
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
        tls, errors = tables_scale.plot_data(argv[2], argv[3])
        print("\n".join(tls))
        return failed(errors)
    if len(argv) < 3 or argv[1] not in KINDS:
        print("usage: tables.py %s DIR [--markdown FILE]... "
              "[--plots DEST] (--help)" % "|".join(KINDS),
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
    of = {"bench": bench_blocks, "faults": faults_blocks, "check": check_blocks}
    blocks, errors = of[kind](d) if kind in of else OWN_BLOCKS[kind].blocks(d)
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
