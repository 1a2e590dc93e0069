#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""releases.py: the README's table of UCX releases (README, Supported UCX
releases), a row per UCX release and source, written by
contrib/harness/ucx-matrix.sh --readme FILE. Python 3, standard library only.

  releases.py row OPTIONS          print one run's row (OPTIONS below)
  releases.py splice FILE --row ROW
                                   put ROW into FILE's block between
                                   '<!-- BEGIN generated: releases -->' and
                                   '<!-- END generated -->': it replaces the
                                   row with the same key or is added; rows
                                   sorted by version, then source. Exit 1,
                                   FILE unchanged, if FILE has no such block
                                   or the block holds anything but the table
  releases.py check FILE           the block's form: exit 1 and a line per
                                   problem if it is missing, has no row, a
                                   row lacks a cell, has a dirty or no
                                   commit, a cell not in the form below, or
                                   two rows share a key; a row whose count
                                   has failures is a warning (a result, not
                                   a problem of form)

The key of a row: its UCX cell and its source, the "from, how loaded" cell
up to its first ',' or ' (' ("own prefix", "Debian root trixie").

The columns (test/docs.test checks date, kernel, UCX, commit and run too):
  UCX               the version the build reported ('1.18.1')
  from, how loaded  'own prefix (UCX's default configure)' or '(configure
                    FLAGS)' besides --prefix, or 'Debian root CODENAME,
                    libucx0 VERSION'; then 'preloaded' or 'UCX_PLUGIN_PATH';
                    then 'assertions on|off' where ucx_info -b said
  date              'YYYY-MM-DD HH:MM UTC', when the run started
  kernel            the guest kernel(s) booted, or 'none (--no-guest)'
  commit            the tree tested, 7 to 40 hex digits, no '-dirty'
  run               'whole run' or 'partial run (what did not run)'
  result            'N passed, M failed', then for a root ' (of which MPI
                    and OSHMEM runs: N passed, M failed)'

row OPTIONS (all strings; '|' becomes '/'):
  --ucx VERSION --source prefix|root --loaded LD_PRELOAD|UCX_PLUGIN_PATH
  --date DATE --kernel KERNEL --commit COMMIT --run RUN --result 'N passed,
  M failed' [--mpi 'N passed, M failed'] [--build-info FILE: the output of
  that UCX's 'ucx_info -b'] [--root DIR: its etc/os-release names the
  codename] [--libucx0 VERSION: the root's package]
"""

import argparse
import os
import re
import shutil
import sys

BEGIN = "<!-- BEGIN generated: releases -->"
END = "<!-- END generated -->"
COLUMNS = ["UCX", "from, how loaded", "date", "kernel", "commit", "run", "result"]
HEADER = "| " + " | ".join(COLUMNS) + " |"
SEPARATOR = "|" + " --- |" * len(COLUMNS)

COUNT = r"\d+ passed, \d+ failed"
FORM = {
    "UCX": (r"\d+\.\d+(\.\d+)?", "a version, e.g. 1.18.1"),
    "from, how loaded": (r"(own prefix|Debian root)\b.*", "'own prefix ...' or 'Debian root ...'"),
    "date": (r"\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC", "'YYYY-MM-DD HH:MM UTC'"),
    "kernel": (r"(?!unknown\b)\S.*", "a kernel, or 'none (--no-guest)'"),
    "commit": (r"[0-9a-f]{7,40}", "a clean commit (7 to 40 hex digits)"),
    "run": (r"whole run|partial run \(.+\)", "'whole run' or 'partial run (...)'"),
    "result": (r"%s( \(of which MPI and OSHMEM runs: %s\))?" % (COUNT, COUNT),
               "'N passed, M failed'[' (of which MPI and OSHMEM runs: N passed, M failed)']"),
}


def say(msg):
    print("releases.py: " + msg, file=sys.stderr)


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def key(row):
    c = cells(row)
    source = re.split(r",| \(", c[1], maxsplit=1)[0].strip() if len(c) > 1 else ""
    return (c[0], source)


def sort_key(row):
    ver, source = key(row)
    nums = re.findall(r"\d+", ver)
    return ([int(n) for n in nums] if nums else [1 << 30], ver, source)


def name(row):
    return "%s %s" % key(row)


# --- row --------------------------------------------------------------------

def build_info(path):
    """(ENABLE_ASSERT or None, configure flags but --prefix or None)."""
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except (OSError, TypeError):
        return None, None
    a = re.search(r"^#define ENABLE_ASSERT\s+(\d+)\s*$", text, re.M)
    m = re.search(r'^#define UCX_CONFIGURE_FLAGS\s+"(.*)"\s*$', text, re.M)
    flags = None
    if m:
        flags = " ".join(f for f in m.group(1).split() if not f.startswith("--prefix="))
    return (a.group(1) if a else None), flags


def codename(root):
    """The root's VERSION_CODENAME (its etc/os-release, or usr/lib's)."""
    for rel in ("etc/os-release", "usr/lib/os-release"):
        p = os.path.join(root, rel)
        if os.path.islink(p) and os.path.isabs(os.readlink(p)):
            p = os.path.join(root, os.readlink(p).lstrip("/"))
        try:
            with open(p) as f:
                m = re.search(r'^VERSION_CODENAME="?([^"\n]*)"?$', f.read(), re.M)
        except OSError:
            continue
        if m and m.group(1):
            return m.group(1)
    return None


def make_row(a):
    asserts, flags = build_info(a.build_info)
    if a.source == "prefix":
        where = "own prefix" + (" (UCX's default configure)" if flags == "" else
                                " (configure %s)" % flags if flags else "")
    else:
        where = "Debian root %s, libucx0 %s" % (codename(a.root or "/") or "(no VERSION_CODENAME)",
                                                 a.libucx0 or "(not installed?)")
    how = {"LD_PRELOAD": "preloaded", "UCX_PLUGIN_PATH": "UCX_PLUGIN_PATH"}.get(
        a.loaded, "loaded how: unknown")
    src = ", ".join([where, how] + (["assertions %s" % ("on" if asserts != "0" else "off")]
                                    if asserts is not None else []))
    result = a.result + (" (of which MPI and OSHMEM runs: %s)" % a.mpi if a.mpi else "")
    row = [a.ucx, src, a.date, a.kernel, a.commit, a.run, result]
    return "| " + " | ".join(re.sub(r"\s+", " ", c.replace("|", "/")).strip()
                             for c in row) + " |"


# --- the block ----------------------------------------------------------------

def read_block(path):
    """(lines, begin, end, rows, problems) of PATH's releases block; rows
    None where there is no table to read."""
    with open(path) as f:
        lines = f.read().split("\n")
    b = next((i for i, l in enumerate(lines) if l.strip() == BEGIN), None)
    if b is None:
        return lines, None, None, None, ["no '%s' block" % BEGIN]
    e = next((i for i in range(b + 1, len(lines)) if lines[i].strip() == END), None)
    if e is None:
        return lines, b, None, None, ["no '%s' after '%s' (line %d)" % (END, BEGIN, b + 1)]
    problems = ["line %d: not part of the table (the block holds only the table)" % (i + 1)
                for i in range(b + 1, e)
                if lines[i].strip() and not lines[i].lstrip().startswith("|")]
    table = [l.strip() for l in lines[b + 1:e] if l.lstrip().startswith("|")]
    if not table:
        return lines, b, e, [], problems
    if cells(table[0]) != COLUMNS or len(table) < 2 or \
            not re.fullmatch(r"\|( *:?-+:? *\|)+", table[1].replace(" ", "")):
        problems.append("the table's header is not '%s' and '%s'" % (HEADER, SEPARATOR))
        return lines, b, e, None, problems
    return lines, b, e, table[2:], problems


def row_problems(row):
    """(problems, warnings) of one row's form."""
    c, what = cells(row), "row '%s'" % name(row)
    if len(c) != len(COLUMNS):
        return ["%s: %d cells, not %d" % (what, len(c), len(COLUMNS))], []
    problems, warnings = [], []
    for col, cell in zip(COLUMNS, c):
        rx, want = FORM[col]
        if not cell:
            problems.append("%s: no %s" % (what, col))
        elif col == "commit" and cell.endswith("-dirty"):
            problems.append("%s: commit %s is dirty (a tree with changes not committed)"
                            % (what, cell))
        elif not re.fullmatch(rx, cell):
            problems.append("%s: %s '%s' is not %s" % (what, col, cell, want))
    m = re.match(r"\d+ passed, (\d+) failed", c[-1])
    if m and int(m.group(1)):
        warnings.append("%s: %s failed (a result: the run's log says which)"
                        % (what, m.group(1)))
    return problems, warnings


def check(path):
    try:
        _, _, _, rows, problems = read_block(path)
    except OSError as e:
        say("%s: %s" % (path, e.strerror))
        return 1
    warnings = []
    if rows is not None:
        if not rows:
            problems.append("the releases block has no rows "
                            "(contrib/harness/ucx-matrix.sh --readme writes them)")
        seen = set()
        for r in rows:
            p, w = row_problems(r)
            problems += p
            warnings += w
            if key(r) in seen:
                problems.append("row '%s': a second row with that key" % name(r))
            seen.add(key(r))
        if rows != sorted(rows, key=sort_key):
            problems.append("the rows are not sorted by version, then source")
    for w in warnings:
        say("%s: warning: %s" % (path, w))
    for p in problems:
        say("%s: %s" % (path, p))
    if problems:
        return 1
    print("releases.py: %s: %d rows, in form" % (path, len(rows)))
    return 0


def splice(path, row):
    try:
        lines, b, e, rows, problems = read_block(path)
    except OSError as err:
        say("%s: %s" % (path, err.strerror))
        return 1
    if rows is None or problems:
        for p in problems:
            say("%s: %s" % (path, p))
        say("%s: unchanged" % path)
        return 1
    if len(cells(row)) != len(COLUMNS):
        say("--row has %d cells, not %d: %s" % (len(cells(row)), len(COLUMNS), row))
        return 1
    p, _ = row_problems(row)
    for x in p:
        say("%s: warning: the new %s" % (path, x))
    old = [r for r in rows if key(r) == key(row)]
    rows = sorted([r for r in rows if key(r) != key(row)] + [row.strip()], key=sort_key)
    text = "\n".join(lines[:b + 1] + [HEADER, SEPARATOR] + rows + lines[e:])
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    shutil.copymode(path, tmp)
    os.replace(tmp, path)
    say("%s: %s the row '%s'" % (path, "replaced" if old else "added", name(row)))
    return 0


def main(argv):
    if len(argv) > 1 and argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if len(argv) == 3 and argv[1] == "check":
        return check(argv[2])
    if len(argv) == 5 and argv[1] == "splice" and argv[3] == "--row":
        return splice(argv[2], argv[4])
    if len(argv) > 1 and argv[1] == "row":
        ap = argparse.ArgumentParser(prog="releases.py row")
        for o in ("ucx", "loaded", "date", "kernel", "commit", "run", "result"):
            ap.add_argument("--" + o, required=True)
        ap.add_argument("--source", required=True, choices=("prefix", "root"))
        for o in ("mpi", "build-info", "root", "libucx0"):
            ap.add_argument("--" + o)
        print(make_row(ap.parse_args(argv[2:])))
        return 0
    print("usage: releases.py row OPTIONS | splice FILE --row ROW | check FILE (--help)",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
