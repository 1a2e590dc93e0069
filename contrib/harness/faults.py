#!/usr/bin/env python3
"""faults.py: the fault bench's numbers and verdicts (contrib/harness/faults.sh).

faults.sh runs the processes and breaks the wire; this reads what they
printed and judges each row. Python 3, standard library only.

  faults.py plan SCENARIO        the faults' schedule, "K LENGTH_US GAP_US"
                                 a line (flap_Xs: one flap of X s; flaps_N:
                                 the soak's N flaps, lengths and gaps cycled)
  faults.py row LOG              judge one row: appends it to DIR/faults.csv
                                 and DIR/faults.notes (DIR: LOG's directory's
                                 parent), says it on stderr
  faults.py summary DIR ROW...   the table of the rows ROW ("transport/
                                 scenario"); exits 1 if a judged row failed
                                 or is missing, 2 if no ROW is given

What a row reads, all written by faults.sh or the processes:
  LOG.run     key=value: transport, scenario, kind (uct or mpi), exit (the
              client's or mpirun's exit status), killed (1: faults.sh killed
              it as hung), note (faults.sh's: "never streamed"), na (the
              scenario does not apply, and why), reconnect_timeout (ucx_info's
              UCX_SYNCMEM_RECONNECT_TIMEOUT, e.g. 5000000.00us; empty: the
              build has no reconnect)
  LOG.client  (kind uct) the client's output; LOG itself (kind mpi) mpirun's
  LOG.faults  "fault K START END" a line (realtime seconds)
The processes' lines that count (contrib/harness/faults.c, faults_mpi.c):
  result KEY=VALUE...         the measured columns (the last one counts)
  stall START END [open]      a gap of more than 100 ms in the stream
  streamed START END          the stream's first completed batch and end
  event reconnect resumed|newqp MS, event reconnect gaveup
  event reconnect unparsed ..., event watch failed ...  (not counted: the
                              row cannot be measured)
  pair N failed ...           (faults_mpi) a failed put + fetch-add pair
Nothing else in their output is read.

The verdict rules are faults.sh's (its --help); each row's note starts with
PASS or FAIL and why, rc_verbs rows are "not judged", n/a rows "n/a".
"""

import csv
import os
import re
import sys

# the CSV, key=value and notes readers are tables.py's (the faults table's)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "bench"))
import tables  # noqa: E402

COLUMNS = ["ops_ok", "ops_failed", "lost", "duplicated", "corrupted",
           "reconnects", "hang", "recovery_ms", "ep_recreated"]
CSV_HEADER = ["transport", "scenario"] + COLUMNS

# The soak's flaps (flaps_N): lengths and the gaps after them, cycled
FLAP_LENS = [0.05, 0.2, 0.5, 1.0, 0.1, 0.3]
FLAP_GAPS = [0.1, 0.5, 2.0, 0.3, 1.0, 3.0]

UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def usec(seconds):
    return int(seconds * 1e6 + 0.5)


def plan(scenario):
    """The faults of SCENARIO: [(k, length_us, gap_us)]; [] if it has no
    timed flaps."""
    m = re.fullmatch(r"flaps_([1-9][0-9]*)", scenario)
    if m:
        n = int(m.group(1))
        return [(k, usec(FLAP_LENS[(k - 1) % len(FLAP_LENS)]),
                 usec(FLAP_GAPS[(k - 1) % len(FLAP_GAPS)]) if k < n else 0)
                for k in range(1, n + 1)]
    m = re.fullmatch(r"(?:mpi_)?flap_([0-9.]+)s", scenario)
    if m:
        return [(1, usec(float(m.group(1))), 0)]
    return []


def seconds(value):
    """A UCX time setting as ucx_info prints it (5000000.00us, inf) in
    seconds; None for an empty one, inf for inf."""
    m = re.fullmatch(r"([0-9.]+)([a-z]*)", value.strip())
    if value.strip().startswith("inf"):
        return float("inf")
    if not m:
        return None
    return float(m.group(1)) * UNITS.get(m.group(2) or "s", 1.0)


def short_fault(scenario, deadline):
    """syncmem's reconnect must hide it: a flap shorter than the reconnect
    deadline, the soak (every flap is), the forced QP errors."""
    if scenario == "qp_error":
        return True
    if scenario.startswith("flaps_"):
        longest = max(FLAP_LENS)
    else:
        m = re.fullmatch(r"(?:mpi_)?flap_([0-9.]+)s", scenario)
        if not m:
            return False
        longest = float(m.group(1))
    return deadline == float("inf") or longest < deadline


# --- what the processes printed ---------------------------------------------


class Output:
    """The lines of a process's output that count."""

    def __init__(self, path):
        self.result = None
        self.stalls = []            # (start, end, open)
        self.streamed_end = None
        self.resumed = self.newqp = self.gaveup = 0
        self.reconnect_ms = []
        self.unreadable = []        # events that could not be counted
        self.failed_pairs = 0
        if not os.path.exists(path):
            return
        with open(path, errors="replace") as f:
            for line in f:
                w = line.split()
                if not w:
                    continue
                if w[0] == "result":
                    self.result = dict(x.split("=", 1) for x in w[1:] if "=" in x)
                elif w[0] == "stall" and len(w) >= 3:
                    self.stalls.append((float(w[1]), float(w[2]),
                                        len(w) > 3 and w[3] == "open"))
                elif w[0] == "streamed" and len(w) >= 3:
                    self.streamed_end = float(w[2])
                elif w[:2] == ["event", "reconnect"] and len(w) >= 3:
                    if w[2] in ("resumed", "newqp") and len(w) == 4:
                        setattr(self, w[2], getattr(self, w[2]) + 1)
                        self.reconnect_ms.append(float(w[3]))
                    elif w[2] == "gaveup":
                        self.gaveup += 1
                    else:
                        self.unreadable.append(line.strip())
                elif w[:3] == ["event", "watch", "failed"]:
                    self.unreadable.append(line.strip())
                elif w[0] == "pair" and "failed" in w:
                    self.failed_pairs += 1

    @property
    def reconnects(self):
        return self.resumed + self.newqp

    def val(self, key, default="-"):
        return (self.result or {}).get(key, default)


def read_faults(path):
    """[(k, start, end)] of "fault K START END" lines."""
    out = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                w = line.split()
                if len(w) == 4 and w[0] == "fault":
                    out.append((int(w[1]), float(w[2]), float(w[3])))
    return out


def rank(values, p):
    """Nearest rank P of sorted VALUES."""
    i = int(p * len(values))
    return values[i if i < p * len(values) else i - 1]


def fault_stats(faults, out):
    """How the stream got through the faults:
      faults  how many
      done    those that ended inside the stream (the others: not measured)
      cut     done ones with a stall over them (the fault stopped traffic)
      open    done ones the stream ended stalled after (not recovered)
      median, p99, max: the others' recovery in ms, from the fault's end to
              the end of the stall that holds it (0 if none does); None if
              there are none."""
    st = {"faults": len(faults), "done": 0, "cut": 0, "open": 0}
    rec = []
    for _, f0, f1 in faults:
        if out.streamed_end is not None and f1 > out.streamed_end:
            continue
        st["done"] += 1
        r, cut, is_open = 0.0, False, False
        for s0, s1, s_open in out.stalls:
            if s0 <= f1 and s1 >= f0:
                cut = True
            if s0 <= f1 and s1 >= f1:
                if s_open:
                    is_open = True
                else:
                    r = (s1 - f1) * 1000
        st["cut"] += cut
        if is_open:
            st["open"] += 1
        else:
            rec.append(r)
    rec.sort()
    for k, p in (("median", 0.5), ("p99", 0.99)):
        st[k] = rank(rec, p) if rec else None
    st["max"] = rec[-1] if rec else None
    return st


def ms(v):
    return "-" if v is None else "%.0f" % v


# --- the verdict --------------------------------------------------------------


def failed_of(okfailed):
    """The failed count of an "ok/failed" column."""
    try:
        return int(str(okfailed).split("/")[-1])
    except ValueError:
        return None


def verdict(tl, sc, deadline, v, stats):
    """Why the row fails ('; ' between the reasons); '' when it passes.
    V: lost duplicated corrupted ops_failed ep_recreated, put get fadd am
    (how many of each failed), newqp; STATS: fault_stats or None."""
    reasons = []
    for c in ("lost", "duplicated", "corrupted"):
        if str(v[c]) != "0":
            reasons.append("%s %s" % (c, v[c]))
    if stats is not None:
        if stats["faults"] == 0:
            reasons.append("not measured: no fault was recorded")
        if stats["done"] != stats["faults"]:
            reasons.append("not measured: %d of %d faults ended after the stream"
                           % (stats["faults"] - stats["done"], stats["faults"]))
        if stats["done"] > 0 and stats["cut"] == 0:
            reasons.append("not measured: no stall around the fault (did "
                           "traffic get around it?)")
        if stats["open"]:
            reasons.append("the stream ended before it recovered")
    if tl == "syncmem" and short_fault(sc, deadline):
        for c in ("put", "get", "am"):
            if v[c] != 0:
                reasons.append("%s %ss failed" % (v[c], c))
        if not (v["fadd"] == 0 or v["newqp"] > 0):
            reasons.append("%s fetch-adds failed with no reconnect onto a new QP"
                           % v["fadd"])
        if str(v["ep_recreated"]) not in ("-", "0"):
            reasons.append("the endpoint failed %s times" % v["ep_recreated"])
    elif tl == "syncmem-noreconnect" and "flap" in sc:
        ep = str(v["ep_recreated"])
        try:
            clean = int(v["ops_failed"]) > 0 and (ep == "-" or int(ep) >= 1)
        except ValueError:
            clean = False
        if not clean:
            reasons.append("no clean failure: ops_failed %s, ep_recreated %s "
                           "(want > 0, >= 1)" % (v["ops_failed"], ep))
    return "; ".join(reasons)


def judge_uct(run, log, out, deadline):
    """(columns, why, note) of a row of the faults client."""
    tl, sc = run["transport"], run["scenario"]
    rec = out.reconnects
    note = run.get("note", "")
    hang = run.get("killed") == "1" or out.val("hang") == "1"
    if hang:
        if not note:
            note = "the client's watchdog: what=%s pending=%s" % (
                out.val("what"), out.val("pending"))
        return ([out.val("ops_ok"), out.val("ops_failed"), "-", "-", "-", rec,
                 1, "-", "-"], "hang", "%s; see %s.client" % (note, log))
    if out.result is None or note:
        return (["-"] * 5 + [rec, 0, "-", "-"],
                "not measured: " + (note or "no result line (client exit %s)"
                                    % run.get("exit", "?")),
                "see %s.client" % log)
    stats = None
    if sc.startswith("loss_") or sc == "qp_error":
        recovery = out.val("max_stall_ms")
    else:
        stats = fault_stats(read_faults(log + ".faults"), out)
        recovery = ms(stats["max"])
        if stats["open"] or not stats["cut"]:
            recovery = "none"
        if sc.startswith("flaps_"):
            note = "%d of %d flaps, recovery median %s / p99 %s / max %s ms" % (
                stats["done"], stats["faults"], ms(stats["median"]),
                ms(stats["p99"]), ms(stats["max"]))
    notes = [note] if note else []
    if rec:
        notes.append("syncmem reconnected %d times (%d resumed, %d onto a new "
                     "QP), up to %.0f ms" % (rec, out.resumed, out.newqp,
                                             max(out.reconnect_ms)))
    if out.gaveup:
        notes.append("syncmem gave up reconnecting %d times" % out.gaveup)
    notes.append("%s puts, %s gets, %s fetch-adds, %s AMs ok/failed" % tuple(
        out.val(k) for k in ("put", "get", "fadd", "am")))
    if out.val("am_died_with_peer") != "0":
        notes.append("%s AMs died with the killed server"
                     % out.val("am_died_with_peer"))
    if out.val("connect_failed") != "0":
        notes.append("%s new endpoints that failed to connect"
                     % out.val("connect_failed"))
    v = {k: out.val(k) for k in ("lost", "duplicated", "corrupted",
                                  "ops_failed", "ep_recreated")}
    for k in ("put", "get", "fadd", "am"):
        v[k] = failed_of(out.val(k))
    v["newqp"] = out.newqp
    cols = [out.val("ops_ok"), out.val("ops_failed"), v["lost"],
            v["duplicated"], v["corrupted"], rec, 0, recovery,
            v["ep_recreated"]]
    return cols, verdict(tl, sc, deadline, v, stats), "; ".join(notes)


def judge_mpi(run, log, out, deadline):
    """(columns, why, note) of an Open MPI row (faults_mpi under mpirun)."""
    tl, sc = run["transport"], run["scenario"]
    rec, rc, note = out.reconnects, run.get("exit", "?"), run.get("note", "")
    if run.get("killed") == "1":
        return (["-"] * 5 + [rec, 1, "-", "-"], "hang",
                "mpirun did not finish 90 s after its stream should have "
                "ended; see %s" % log)
    pairs = out.failed_pairs
    if (out.result is None and not note and tl == "syncmem-noreconnect"
            and rc == "3" and pairs >= 2):
        # what the flap cost cannot be counted: the columns say '-'
        return (["-"] * 5 + [rec, 0, "-", "-"], "",
                "the expected clean failure: faults_mpi's MPI_Abort after %d "
                "failed pairs (mpirun exit 3); see %s" % (pairs, log))
    if out.result is None or note:
        return (["-"] * 5 + [rec, 0, "-", "-"], "not measured: " + (
            note or "the job aborted (mpirun exit %s%s)"
            % (rc, ", %d failed pairs" % pairs if pairs else "")),
            "see %s" % log)
    stats = fault_stats(read_faults(log + ".faults"), out)
    recovery = ms(stats["max"])
    if stats["open"] or not stats["cut"]:
        recovery = "none"
    # failed pairs by the call that returned the error: put, fetch-add, flush
    at = out.val("pairs_failed_at", "0/0/0")
    p, f, l = (int(x) for x in at.split("/"))
    notes = ["MPI_Put + MPI_Fetch_and_op, a flush after each pair (osc ucx)"]
    if rec:
        notes.append("syncmem reconnected %d times (%d resumed, %d onto a new QP)"
                     % (rec, out.resumed, out.newqp))
    if at != "0/0/0":
        notes.append("failed pairs at put/fetch-add/flush: %s" % at)
    if rc != "0":
        notes.append("mpirun exit %s" % rc)
    v = {k: out.val(k) for k in ("lost", "duplicated", "corrupted", "ops_failed")}
    v.update(ep_recreated="-", put=p + l, get=0, fadd=f, am=0, newqp=out.newqp)
    cols = [out.val("ops_ok"), out.val("ops_failed"), v["lost"],
            v["duplicated"], v["corrupted"], rec, 0, recovery, "-"]
    return cols, verdict(tl, sc, deadline, v, stats), "; ".join(notes)


def judge(log):
    """(transport, scenario, columns, note) of the row whose files are LOG.*"""
    run = tables.read_meta(log + ".run")
    for k in ("transport", "scenario", "kind"):
        if k not in run:
            raise SystemExit("faults.py: %s.run has no %s" % (log, k))
    tl, sc = run["transport"], run["scenario"]
    if "na" in run:
        return tl, sc, ["n/a"] * len(COLUMNS), "n/a: " + run["na"]
    deadline = seconds(run.get("reconnect_timeout", "")) or 5.0
    out = Output(log + ".client" if run["kind"] == "uct" else log)
    if out.unreadable:
        run["note"] = "; ".join(filter(None, [run.get(
            "note"), "reconnects not counted: " + " / ".join(out.unreadable)]))
    cols, why, note = (judge_uct if run["kind"] == "uct" else judge_mpi)(
        run, log, out, deadline)
    if tl == "rc_verbs":
        # (UCX's own transport dying, e.g. ud_verbs's Fatal after a flap,
        # is a result to show, not ours to gate on)
        note = "not judged" + (" (would fail: %s)" % why if why else "") + \
            ("; " + note if note else "")
    elif why:
        note = "FAIL: " + why + ("; " + note if note else "")
    else:
        note = "PASS" + ("; " + note if note else "")
    return tl, sc, [str(c) for c in cols], note


# --- the files and the table --------------------------------------------------


def write_row(d, tl, sc, cols, note):
    path = os.path.join(d, "faults.csv")
    new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        if new:
            w.writerow(CSV_HEADER)
        w.writerow([tl, sc] + cols)
    with open(os.path.join(d, "faults.notes"), "a") as f:
        f.write("%s\t%s\t%s\n" % (tl, sc, note))


def read_rows(d):
    rows = {}
    for r in tables.read_csv(os.path.join(d, "faults.csv")) or []:
        rows.setdefault((r["transport"], r["scenario"]), []).append(r)
    return rows, tables.read_notes(os.path.join(d, "faults.notes"))


LINE = "%-20s %-13s %8s %7s %5s %5s %6s %6s %5s %9s %6s  %s"


def summary(d, wanted):
    """Prints the table of the rows WANTED; the exit status."""
    rows, notes = read_rows(d)
    print(LINE % ("transport", "scenario", "ops_ok", "failed", "lost", "dup",
                  "corrupt", "reconn", "hang", "recov_ms", "ep_new", "note"))
    bad = []
    for want in wanted:
        tl, _, sc = want.partition("/")
        got = rows.get((tl, sc), [])
        note = notes.get((tl, sc))
        if len(got) != 1 or note is None:
            print(LINE % ((tl, sc) + ("?",) * 9 +
                          ("FAIL: %d results for this row, and %s note"
                           % (len(got), "a" if note else "no"),)))
            bad.append(want)
            continue
        print(LINE % ((tl, sc) + tuple(got[0][c] for c in COLUMNS) + (note,)))
        if note.startswith("FAIL"):
            bad.append(want)
    extra = sorted("%s/%s" % k for k in rows if "%s/%s" % k not in wanted)
    if extra:
        print("FAIL: rows not asked for in %s: %s" % (d, " ".join(extra)))
        return 1
    print("   csv: %s (verdicts: %s); each process's output: %s/"
          % (os.path.join(d, "faults.csv"), os.path.join(d, "faults.notes"),
             os.path.join(d, "faults")))
    if bad:
        print("FAIL: %d judged rows failed (their notes say why): %s"
              % (len(bad), " ".join(bad)))
        return 1
    print("PASS: every judged row passed (lost, duplicated, corrupted, hang 0; "
          "the failures each fault allows)")
    return 0


def main(argv):
    if len(argv) > 1 and argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if len(argv) == 3 and argv[1] == "plan":
        for k, length, gap in plan(argv[2]):
            print(k, length, gap)
        return 0
    if len(argv) == 3 and argv[1] == "row":
        log = argv[2]
        tl, sc, cols, note = judge(log)
        write_row(os.path.dirname(os.path.dirname(os.path.abspath(log))),
                  tl, sc, cols, note)
        print("faults.py:   -> %s (%s)" % (",".join(cols), note), file=sys.stderr)
        return 0
    if len(argv) >= 3 and argv[1] == "summary":
        if len(argv) == 3:
            print("FAIL: no row to summarise")
            return 2
        return summary(argv[2], argv[3:])
    print("usage: faults.py plan SCENARIO | row LOG | summary DIR ROW... (--help)",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
