#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
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
  LOG.faults  faults.sh's record of the faults, a line each of
                fault K START END   fault K's times (realtime seconds): the
                                    link down and up, the loss on and off,
                                    the kill and the new server
                port K DOWN UP      (flaps) the state of rxe0's port 1
                                    (/sys/class/infiniband/rxe0/ports/1/
                                    state, the word after "N: ") read once
                                    the down and once the up had returned
                retrans K N         (loss) the retransmission events both
                                    devices counted over fault K (rxe's
                                    hw_counters: completer_retry_err,
                                    rcvd_seq_err, out_of_seq_request,
                                    duplicate_request); '-': unreadable
The processes' lines that count (contrib/harness/faults.c, faults_mpi.c):
  result KEY=VALUE...         the measured columns (the last one counts)
  stall START END [open]      a gap of more than 100 ms in the stream
  streamed START END          the stream's first completed batch and end
  ep error at T: ...          the client's endpoint failed at T (peer_killed:
                              its note says how long after the kill)
  event reconnect resumed|newqp MS, event reconnect gaveup
  event cm resend N M | reconnect MS   a REQ sent again (faults_events.h)
  event reconnect unparsed ..., event cm unparsed ..., event watch
                              failed ...  (not counted: the row cannot be
                              measured)
  epgap I [START END]...      (scale -F, flap_Xs_nN rows) endpoint I's
                              longest gaps between two completed rounds:
                              its recovery is from the link's return to the
                              END of the gap that holds it
  pair N failed ...           (faults_mpi) a failed put + fetch-add pair
Nothing else in their output is read.

Verdicts. Each row's note starts with PASS, FAIL and why, "not judged"
(rc_verbs: shown for comparison, with what would fail it) or "n/a". A row
of syncmem or syncmem-noreconnect passes only when all of these hold:

 measured   a result line, a "streamed" line, every reconnect counted; not
            killed as hung; the client's (mpirun's) exit status 0, a crash
            after the result line included; lost, duplicated, corrupted 0.
            The columns of a row that could not be measured are '-'.
 happened   the fault is shown to have happened:
              flap_Xs, flap_Xs_nN, flaps_N, mpi_flap_0.5s: every planned
                flap (plan) in
                LOG.faults and inside the stream; for each, its port seen
                down and up ("port K DOWN ACTIVE"); a stall around one flap
                at least, and around every flap of FLAP_MUST_STALL (0.2 s)
                or longer (no batch completes while the link is down, and
                100 ms without one is a stall: a flap that long with no
                stall around it was got around, not measured)
              loss_*: the loss in LOG.faults and inside the stream, and
                the devices' retransmission events counted over it
                ("retrans K N", N > 0: the loss hit the traffic). Reconnects
                are not asked for: a transport's RC retries may hide 1 %
                loss.
              qp_error: syncmem, a reconnect (the forced QP errors go
                through it); syncmem-noreconnect, an endpoint that failed
              peer_killed: the kill in LOG.faults, inside the stream, a
                stall around it
 recovered  the stream did not end in a stall ("stall ... open")
 allowed    the operations that failed are those the fault allows:
              syncmem, a fault its reconnect must hide (loss_*, qp_error,
                flaps_N, a flap shorter than RECONNECT_TIMEOUT,
                mpi_flap_0.5s): no put, get or AM failed, no endpoint
                failed; fetch-adds only where a reconnect went to a new QP
                (an atomic of unknown outcome fails rather than runs twice),
                at most FADD_IN_FLIGHT for each such reconnect: 8 for
                faults (a batch's fetch-adds), 1 for faults_mpi (a pair's)
              any other fault (syncmem past RECONNECT_TIMEOUT, peer_killed;
                syncmem-noreconnect), faults rows: at most EP_FAIL_OPS (64:
                the batch in flight and the one issued before the error
                handler ran, 32 operations each) for each endpoint the
                client created again, plus the fetch-adds above; faults_mpi
                rows count no endpoints: no bound
              syncmem-noreconnect, flap rows: the clean failure as well,
                ops_failed > 0 and ep_recreated >= 1; under MPI,
                faults_mpi's MPI_Abort (mpirun exit 3 after two failed
                pairs in a row, its flaps shown as above, columns '-')
 n/a        only the rows of NA_ALLOWED (rc_verbs/qp_error: rc_verbs has no
            knob to force a QP error); any other row faults.sh did not run
            fails, as not measured.
"""

import csv
import os
import re
import sys

# the CSV, key=value and notes readers are the bench tables' (tables_base.py)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "bench"))
import tables_base  # noqa: E402

COLUMNS = ["ops_ok", "ops_failed", "lost", "duplicated", "corrupted",
           "reconnects", "hang", "recovery_ms", "ep_recreated"]
CSV_HEADER = ["transport", "scenario"] + COLUMNS

# The soak's flaps (flaps_N): lengths and the gaps after them, cycled
FLAP_LENS = [0.05, 0.2, 0.5, 1.0, 0.1, 0.3]
FLAP_GAPS = [0.1, 0.5, 2.0, 0.3, 1.0, 3.0]

# The rules' numbers (the docstring's Verdicts)
FLAP_MUST_STALL = 0.2                 # s: a flap this long stops the stream
FADD_IN_FLIGHT = {"uct": 8, "mpi": 1}  # failed fetch-adds per new-QP reconnect
EP_FAIL_OPS = 64                      # failed operations per new endpoint
NA_ALLOWED = {("rc_verbs", "qp_error")}

# One flap of X s: under faults.c, faults_mpi.c (mpi_), or N endpoints
# (_nN: contrib/bench/scale_flap.c)
FLAP_RE = r"(?:mpi_)?flap_([0-9.]+)s(?:_n[1-9][0-9]*)?"

OPS = {"put": "puts", "get": "gets", "fadd": "fetch-adds", "am": "AMs"}

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
    m = re.fullmatch(FLAP_RE, scenario)
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


def must_hide(scenario, deadline):
    """syncmem's reconnect must hide it: loss, the forced QP errors, the
    soak (every flap is short), a flap shorter than the reconnect
    deadline."""
    if scenario == "qp_error" or scenario.startswith("loss_"):
        return True
    if scenario.startswith("flaps_"):
        longest = max(FLAP_LENS)
    else:
        m = re.fullmatch(FLAP_RE, scenario)
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
        self.resends = []           # (tries, of) of a connect's REQ sent again
        self.reresends = []         # ms before the deadline of a reconnect's
        self.epgaps = []            # each endpoint's gaps: [(start, end)]
        self.ep_errors = []         # when the client's endpoint failed
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
                elif w[:3] == ["event", "cm", "resend"] and len(w) == 5:
                    if w[3] == "reconnect":
                        self.reresends.append(float(w[4]))
                    else:
                        self.resends.append((int(w[3]), int(w[4])))
                elif (w[:3] == ["event", "watch", "failed"] or
                      w[:2] == ["event", "cm"]):
                    self.unreadable.append(line.strip())
                elif w[0] == "epgap" and len(w) % 2 == 0:
                    t = [float(x) for x in w[2:]]
                    self.epgaps.append(list(zip(t[::2], t[1::2])))
                elif w[:3] == ["ep", "error", "at"] and len(w) >= 4:
                    self.ep_errors.append(float(w[3].rstrip(":")))
                elif w[0] == "pair" and "failed" in w:
                    self.failed_pairs += 1

    @property
    def reconnects(self):
        return self.resumed + self.newqp

    def val(self, key, default="-"):
        return (self.result or {}).get(key, default)


class FaultLog:
    """What faults.sh recorded of the faults (LOG.faults: the docstring)."""

    def __init__(self, path):
        self.faults = []            # (k, start, end)
        self.ports = {}             # k: (state after the down, after the up)
        self.retrans = {}           # k: retransmissions over fault k
        if not os.path.exists(path):
            return
        with open(path) as f:
            for line in f:
                w = line.split()
                if len(w) == 4 and w[0] == "fault":
                    self.faults.append((int(w[1]), float(w[2]), float(w[3])))
                elif len(w) == 4 and w[0] == "port":
                    self.ports[int(w[1])] = (w[2], w[3])
                elif len(w) == 3 and w[0] == "retrans":
                    self.retrans[int(w[1])] = count(w[2])


def count(s):
    """An integer column or word; None if it is none ('-', missing)."""
    try:
        return int(str(s))
    except ValueError:
        return None


def rank(values, p):
    """Nearest rank P of sorted VALUES."""
    i = int(p * len(values))
    return values[i if i < p * len(values) else i - 1]


def fault_stats(faults, out):
    """How the stream got through the faults:
      faults  how many
      done    those that ended inside the stream (the others: not measured)
      cut     done ones with a stall over them (the fault stopped traffic)
      uncut   the done ones' K that no stall is over
      open    done ones the stream ended stalled after (not recovered)
      ended_stalled  the stream ended in a stall, after a fault or not
      streamed  the stream said when it ended
      median, p99, max: the others' recovery in ms, from the fault's end to
              the end of the stall that holds it (0 if none does); None if
              there are none."""
    st = {"faults": len(faults), "done": 0, "cut": 0, "uncut": [], "open": 0,
          "ended_stalled": any(s[2] for s in out.stalls),
          "streamed": out.streamed_end is not None}
    rec = []
    for k, f0, f1 in faults:
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
        if not cut:
            st["uncut"].append(k)
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
    return count(str(okfailed).split("/")[-1])


def ks(ns):
    return ", ".join(str(k) for k in ns)


def flaps_shown(sc, flog):
    """Why the planned flaps of SC are not all shown to have happened in
    FLOG: each recorded, its port seen down and up ([] if they are, or SC
    has no flaps)."""
    want = [k for k, _, _ in plan(sc)]
    if not want:
        return []
    reasons = []
    got = [k for k, _, _ in flog.faults]
    missing = [k for k in want if k not in got]
    if missing:
        reasons.append("not measured: %d of %d flaps not recorded (%s)"
                       % (len(missing), len(want), ks(missing[:10])))
    if not flog.ports:
        reasons.append("not measured: no port state recorded for the flaps "
                       "(faults.sh must write 'port K DOWN ACTIVE' per flap "
                       "into the .faults file)")
        return reasons
    bad = [k for k in want if flog.ports.get(k) != ("DOWN", "ACTIVE")]
    if bad:
        reasons.append("not measured: the port not seen down and up for %d of "
                       "%d flaps (%s)" % (len(bad), len(want), ", ".join(
                           "%d: %s" % (k, "/".join(flog.ports[k])
                                       if k in flog.ports else "none")
                           for k in bad[:10])))
    return reasons


def happened(tl, sc, v, stats, flog):
    """Why the fault of row TL/SC is not shown to have happened ([] if it
    is): the docstring's "happened"."""
    if sc == "qp_error":
        if tl == "syncmem" and v["reconnects"] == 0:
            return ["not measured: no reconnect (the forced QP errors not shown)"]
        if tl != "syncmem" and not (count(v["ep_recreated"]) or 0) > 0:
            return ["not measured: no endpoint failed (the forced QP errors "
                    "not shown)"]
        return []
    reasons = flaps_shown(sc, flog)
    if stats["faults"] == 0:
        return reasons + ["not measured: no fault was recorded"]
    if stats["done"] != stats["faults"]:
        reasons.append("not measured: %d of %d faults ended after the stream"
                       % (stats["faults"] - stats["done"], stats["faults"]))
    if sc.startswith("loss_"):
        missing = [k for k, _, _ in flog.faults if k not in flog.retrans]
        if missing:
            reasons.append("not measured: no retransmission count recorded "
                           "for the loss (fault %s)" % ks(missing))
        none = [k for k, n in sorted(flog.retrans.items()) if not n]
        if none:
            reasons.append("not measured: no retransmission counted during "
                           "the loss (fault %s)" % ks(none))
        return reasons
    lengths = {k: length for k, length, _ in plan(sc)}
    long_uncut = [k for k in stats["uncut"]
                  if lengths.get(k, 0) >= usec(FLAP_MUST_STALL)]
    if stats["done"] > 0 and stats["cut"] == 0:
        reasons.append("not measured: no stall around the fault (did "
                       "traffic get around it?)")
    elif long_uncut:
        reasons.append("not measured: %d flaps of %g s or longer stopped no "
                       "traffic (%s; did traffic get around them?)"
                       % (len(long_uncut), FLAP_MUST_STALL, ks(long_uncut[:10])))
    return reasons


def allowed(tl, sc, deadline, kind, v):
    """Why the failures of row TL/SC are more than its fault allows ([] if
    they are not): the docstring's "allowed"."""
    reasons = []
    per_newqp = FADD_IN_FLIGHT[kind]
    if tl == "syncmem" and must_hide(sc, deadline):
        for c in ("put", "get", "am"):
            if v[c] != 0:
                reasons.append("%s %s failed" % (v[c], OPS[c]))
        if v["fadd"] is None:
            reasons.append("fetch-adds not counted")
        elif v["fadd"] and not v["newqp"]:
            reasons.append("%s fetch-adds failed with no reconnect onto a new QP"
                           % v["fadd"])
        elif v["fadd"] > per_newqp * v["newqp"]:
            reasons.append("%d fetch-adds failed, more than %d (%d per reconnect "
                           "onto a new QP, %d of them)"
                           % (v["fadd"], per_newqp * v["newqp"], per_newqp,
                              v["newqp"]))
        if str(v["ep_recreated"]) not in ("-", "0"):
            reasons.append("the endpoint failed %s times" % v["ep_recreated"])
    elif kind == "uct":
        failed, ep = count(v["ops_failed"]), count(v["ep_recreated"])
        if failed is None or ep is None:
            reasons.append("ops_failed %s, ep_recreated %s: not counted"
                           % (v["ops_failed"], v["ep_recreated"]))
        elif failed > EP_FAIL_OPS * ep + per_newqp * v["newqp"]:
            reasons.append("%d operations failed, more than %d (%d per endpoint "
                           "created again, %d of them; %d per reconnect onto a "
                           "new QP, %d of them)"
                           % (failed, EP_FAIL_OPS * ep + per_newqp * v["newqp"],
                              EP_FAIL_OPS, ep, per_newqp, v["newqp"]))
    if tl == "syncmem-noreconnect" and "flap" in sc:
        ep = str(v["ep_recreated"])
        try:
            clean = int(v["ops_failed"]) > 0 and (ep == "-" or int(ep) >= 1)
        except ValueError:
            clean = False
        if not clean:
            reasons.append("no clean failure: ops_failed %s, ep_recreated %s "
                           "(want > 0, >= 1)" % (v["ops_failed"], ep))
    return reasons


def verdict(tl, sc, deadline, kind, v, stats, flog):
    """Why the row fails ('; ' between the reasons); '' when it passes.
    KIND: uct or mpi; V: lost duplicated corrupted ops_failed ep_recreated,
    put get fadd am (how many of each failed), newqp, reconnects, exit;
    STATS: fault_stats; FLOG: the FaultLog."""
    reasons = []
    for c in ("lost", "duplicated", "corrupted"):
        if str(v[c]) != "0":
            reasons.append("%s %s" % (c, v[c]))
    if v["exit"] != "0":
        reasons.append("%s exited %s after its result line" % (
            "the client" if kind == "uct" else "mpirun", v["exit"]))
    if not stats["streamed"]:
        reasons.append("not measured: no streamed line (when did the stream end?)")
    reasons += happened(tl, sc, v, stats, flog)
    if stats["ended_stalled"]:
        reasons.append("the stream ended before it recovered")
    reasons += allowed(tl, sc, deadline, kind, v)
    return "; ".join(reasons)


def ep_recovery(sc, flog, out, stats, notes):
    """The recovery column of a flap under N endpoints (SC flap_Xs_nN): the
    last endpoint's, in ms from the link's return to the end of its longest
    gap; the note says median / p99 / max across them, and how many did
    not stall; and why it could not be measured ('' if it was). "none":
    the stream did not get through the flap."""
    n = int(sc.rsplit("_n", 1)[1])
    if len(out.epgaps) != n or len(flog.faults) != 1:
        return "-", ("not measured: %d of %d endpoints' gaps, %d flaps "
                     "recorded" % (len(out.epgaps), n, len(flog.faults)))
    _, f0, f1 = flog.faults[0]
    held = [[(e1 - f1) * 1000 for e0, e1 in gaps if e0 <= f1 <= e1]
            for gaps in out.epgaps]
    rec = sorted(h[0] if h else 0.0 for h in held)
    calm = sum(1 for h in held if not h)
    notes.append("%d endpoints: recovery median %s / p99 %s / max %s ms "
                 "from the link's return%s"
                 % (n, ms(rank(rec, 0.5)), ms(rank(rec, 0.99)), ms(rec[-1]),
                    ", %d not stalled over it" % calm if calm else ""))
    if stats["open"] or not stats["cut"]:
        return "none", ""
    return ms(rec[-1]), ""


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
    flog = FaultLog(log + ".faults")
    stats = fault_stats(flog.faults, out)
    notes, ep_why = [], ""
    if sc.startswith("loss_") or sc == "qp_error":
        recovery = out.val("max_stall_ms")
        if stats["ended_stalled"]:
            recovery = "none"
        if (sc.startswith("loss_") and flog.retrans and
                all(flog.retrans.values())):
            notes.append("%s retransmission events during the loss" %
                         "+".join(str(n) for _, n in
                                  sorted(flog.retrans.items())))
    elif "_n" in sc:
        recovery, ep_why = ep_recovery(sc, flog, out, stats, notes)
    else:
        recovery = ms(stats["max"])
        if stats["open"] or not stats["cut"]:
            recovery = "none"
        if sc.startswith("flaps_"):
            notes.append("%d of %d flaps measured, %d stopped the traffic, "
                         "recovery median %s / p99 %s / max %s ms"
                         % (stats["done"], len(plan(sc)), stats["cut"],
                            ms(stats["median"]), ms(stats["p99"]),
                            ms(stats["max"])))
    if sc == "peer_killed" and flog.faults:
        # how long the death took to reach the application: from the kill
        # to the first endpoint error after it
        after = [t for t in out.ep_errors if t >= flog.faults[0][1]]
        notes.append("the death reported %s ms after the kill" %
                     ms(1000 * (min(after) - flog.faults[0][1])) if after else
                     "no endpoint error after the kill")
    if rec:
        notes.append("syncmem reconnected %d times (%d resumed, %d onto a new "
                     "QP), up to %.0f ms" % (rec, out.resumed, out.newqp,
                                             max(out.reconnect_ms)))
    if out.gaveup:
        notes.append("syncmem gave up reconnecting %d times" % out.gaveup)
    if out.resends or out.reresends:
        notes.append("REQs sent again: %d of connects (at most try %s of %s), "
                     "%d of reconnects (the latest %s ms before the deadline)"
                     % (len(out.resends),
                        max([t for t, _ in out.resends] or ["-"]),
                        max([m for _, m in out.resends] or ["-"]),
                        len(out.reresends),
                        ms(min(out.reresends)) if out.reresends else "-"))
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
    v.update(newqp=out.newqp, reconnects=rec, exit=run.get("exit", "?"))
    cols = [out.val("ops_ok"), out.val("ops_failed"), v["lost"],
            v["duplicated"], v["corrupted"], rec, 0, recovery,
            v["ep_recreated"]]
    why = verdict(tl, sc, deadline, "uct", v, stats, flog)
    return (cols, "; ".join(filter(None, [why, ep_why])), "; ".join(notes))


def judge_mpi(run, log, out, deadline):
    """(columns, why, note) of an Open MPI row (faults_mpi under mpirun)."""
    tl, sc = run["transport"], run["scenario"]
    rec, rc, note = out.reconnects, run.get("exit", "?"), run.get("note", "")
    if run.get("killed") == "1":
        return (["-"] * 5 + [rec, 1, "-", "-"], "hang",
                "mpirun did not finish 90 s after its stream should have "
                "ended; see %s" % log)
    pairs = out.failed_pairs
    flog = FaultLog(log + ".faults")
    if (out.result is None and not note and tl == "syncmem-noreconnect"
            and rc == "3" and pairs >= 2):
        # what the flap cost cannot be counted: the columns say '-'
        return (["-"] * 5 + [rec, 0, "-", "-"], "; ".join(flaps_shown(sc, flog)),
                "the expected clean failure: faults_mpi's MPI_Abort after %d "
                "failed pairs (mpirun exit 3); see %s" % (pairs, log))
    if out.result is None or note:
        return (["-"] * 5 + [rec, 0, "-", "-"], "not measured: " + (
            note or "the job aborted (mpirun exit %s%s)"
            % (rc, ", %d failed pairs" % pairs if pairs else "")),
            "see %s" % log)
    stats = fault_stats(flog.faults, out)
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
    v = {k: out.val(k) for k in ("lost", "duplicated", "corrupted", "ops_failed")}
    v.update(ep_recreated="-", put=p + l, get=0, fadd=f, am=0, newqp=out.newqp,
             reconnects=rec, exit=rc)
    cols = [out.val("ops_ok"), out.val("ops_failed"), v["lost"],
            v["duplicated"], v["corrupted"], rec, 0, recovery, "-"]
    return (cols, verdict(tl, sc, deadline, "mpi", v, stats, flog),
            "; ".join(notes))


def judge(log):
    """(transport, scenario, columns, note) of the row whose files are LOG.*"""
    run = tables_base.read_meta(log + ".run")
    for k in ("transport", "scenario", "kind"):
        if k not in run:
            raise SystemExit("faults.py: %s.run has no %s" % (log, k))
    tl, sc = run["transport"], run["scenario"]
    if "na" in run and (tl, sc) in NA_ALLOWED:
        return tl, sc, ["n/a"] * len(COLUMNS), "n/a: " + run["na"]
    if "na" in run:
        cols, why, note = (["-"] * len(COLUMNS), "not measured: faults.sh did "
                           "not run it (%s); only %s may be n/a" % (
                               run["na"], " ".join(
                                   "%s/%s" % r for r in sorted(NA_ALLOWED))), "")
    else:
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
    for r in tables_base.read_csv(os.path.join(d, "faults.csv")) or []:
        rows.setdefault((r["transport"], r["scenario"]), []).append(r)
    return rows, tables_base.read_notes(os.path.join(d, "faults.notes"))


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
        # (a verdict is PASS, not judged, or n/a where n/a is allowed;
        # anything else fails)
        if not (note.startswith(("PASS", "not judged")) or
                (note.startswith("n/a") and (tl, sc) in NA_ALLOWED)):
            if not note.startswith("FAIL"):
                note = "FAIL: not a verdict for this row: " + note
            bad.append(want)
        print(LINE % ((tl, sc) + tuple(got[0][c] for c in COLUMNS) + (note,)))
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
