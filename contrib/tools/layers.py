#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The module's files as a call graph, from the compiler's own call graphs.

usage: layers.py [--print] [--dot] [--doc MD] FILE.ci...

Reads the .ci files gcc writes with -fcallgraph-info (compiled at -O0 with
-fkeep-inline-functions, so that every call is still a call and every inline
function in a header is attributed to the header that defines it). A call
written in file A to a function defined in file B is an edge A -> B;
calls within a file, and calls to UCS, verbs or libc, are not. Taking a
function's address (an ops table, a callback) is not a call: that is how a
lower file reaches up.

Exits 1, naming the files and one call of each edge, when the file graph has
a circle (a file calls a function of a file that calls it back, directly or
through others); 0 otherwise. --print lists the files by layer (a file only
calls files in lower layers), with what each one calls. --doc MD: also
fails unless MD's table rows '| LAYER | `FILE` | ... |' give every module
source (.c, .inl) the layer computed here.
"""
import collections
import os
import re
import sys

NODE = re.compile(r'node: \{ title: "([^"]*)" label: "([^"\\]*)\\n([^":]*):(\d+):\d+"')
EDGE = re.compile(r'edge: \{ sourcename: "([^"]*)" targetname: "([^"]*)" label: "([^":]*):(\d+)')


def own(path):
    """The module file a source location is in, or None (UCS, libc...)."""
    path = os.path.normpath(path)
    parts = path.split(os.sep)
    if 'uct_syncmem' not in parts[:-1]:
        return None
    return parts[-1]


def read(files):
    defined = {}            # global function name -> defining file
    where = {}              # node title -> (function name, file or None)
    edges = []              # (caller title, callee title, call site)
    units = set()           # the sources compiled
    for ci in files:
        with open(ci, encoding='utf-8', errors='replace') as f:
            text = f.read()
        m = re.match(r'graph: \{ title: "([^"]*)"', text)
        if m and own(m.group(1)):
            units.add(own(m.group(1)))     # a unit calling no other file
        for line in text.splitlines():
            m = NODE.search(line)
            if not m:
                continue
            title, name, path = m.group(1), m.group(2), m.group(3)
            if 'shape : ellipse' in line:       # called here, defined elsewhere
                where.setdefault(title, (name, None))
                continue
            # a definition: a static one's title names its unit, a global
            # one's is its name, which is what other units call
            where[title] = (name, own(path))
            if title == name and own(path):
                defined[name] = own(path)
        for src, dst, path, line in EDGE.findall(text):
            edges.append((src, dst, own(path), line))
    calls = collections.defaultdict(dict)   # A -> {B: example}
    for src, dst, sitefile, line in edges:
        # the file of the call site, not of the caller: an always-inline
        # function's calls are its header's even where it was inlined
        sname, sfile = where.get(src, (src, None))
        sfile = sitefile or sfile
        dname, dfile = where.get(dst, (dst, None))
        dfile = dfile or defined.get(dname)
        if sfile and dfile and sfile != dfile:
            calls[sfile].setdefault(dfile, '%s -> %s (%s:%s)'
                                    % (sname, dname, sfile, line))
    nodes = set(defined.values()) | set(calls) | units
    for b in calls.values():
        nodes |= set(b)
    return nodes, calls


def circles(nodes, calls):
    """Tarjan's strongly connected components of more than one file."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(calls.get(v, {})):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def layers(nodes, calls):
    level = {}

    def depth(v):
        if v not in level:
            level[v] = 0
            level[v] = 1 + max((depth(w) for w in calls.get(v, {})), default=-1)
        return level[v]
    for v in nodes:
        depth(v)
    return level


def check_doc(path, nodes, level):
    """Mismatches between MD's table of layers and the computed ones."""
    row = re.compile(r'^\| *(\d+) *\| *`([^`]+)` *\|')
    said = {}
    with open(path, encoding='utf-8') as f:
        for line in f:
            m = row.match(line)
            if m:
                said[m.group(2)] = int(m.group(1))
    bad = []
    for v in sorted(n for n in nodes if n.endswith(('.c', '.inl'))):
        if v not in said:
            bad.append('%s: not in the table' % v)
        elif said[v] != level[v]:
            bad.append('%s: layer %d in the table, %d computed'
                       % (v, said[v], level[v]))
    for v in sorted(set(said) - set(nodes)):
        bad.append('%s: in the table, not in the module' % v)
    return bad


def main(argv):
    doc = None
    if '--doc' in argv:
        i = argv.index('--doc')
        doc = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    opts = [a for a in argv if a.startswith('--')]
    files = [a for a in argv if not a.startswith('--')]
    if not files or '--help' in opts:
        print(__doc__.strip())
        return 0 if '--help' in opts else 2
    nodes, calls = read(files)
    if not calls:
        print('layers: no call between the module\'s files in %d call graphs: '
              'were they built with -fcallgraph-info?' % len(files))
        return 1
    bad = circles(nodes, calls)
    for comp in bad:
        print('circle: %s' % ' '.join(comp))
        for a in comp:
            for b in comp:
                if b in calls.get(a, {}):
                    print('  %s' % calls[a][b])
    if bad:
        print('layers: %d circle(s) between files: a lower file may reach a higher '
              'one only through a callback or an event' % len(bad))
        return 1
    level = layers(nodes, calls)
    if doc:
        bad = check_doc(doc, nodes, level)
        for b in bad:
            print('%s: %s' % (doc, b))
        if bad:
            print('layers: %s does not show the layers the code has' % doc)
            return 1
    if '--print' in opts:
        for lv in sorted(set(level.values())):
            for v in sorted(n for n in nodes if level[n] == lv):
                print('%d %-24s %s' % (lv, v, ' '.join(sorted(calls.get(v, {})))))
    if '--dot' in opts:
        print('digraph layers {')
        for a in sorted(calls):
            for b in sorted(calls[a]):
                print('  "%s" -> "%s";' % (a, b))
        print('}')
    print('layers: %d files, %d calls between them, no circle'
          % (len(nodes), sum(len(b) for b in calls.values())))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
