#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The files of a directory as rooms, and which room calls which.

usage: layers.py [--print] [--dot] [--doc MD [--update]] FILE.ci... FILE.py...

A room is what a reader opens together: a source and the header of its name
(X.c with X.h or X.inl beside it). A header with no source of its name is a
room of its own (compat.h, syncmem_tx.inl); so is a python module. A room
takes from another when one of its files
  - calls a function the other defines (gcc's -fcallgraph-info: compiled at
    -O0 with -fkeep-inline-functions and always_inline made noinline, so
    that a header's inline function, or one a macro such as khash's makes
    there, is defined in that header's room, and a call counts in the file
    it is written in, even inside an inline function);
  - imports it (python; anywhere in the module, a function's body too).
Taking a function's address (an ops table, a callback) is not a call: that
is how a lower room reaches up. Types and macros are not counted: a
header's declarations are what its includers share.

The house is the directories of the compiled sources (each FILE.ci names its
unit) and of the python modules given; calls and imports outside it (UCS,
verbs, libc, the standard library) are not edges.

Exits 1 when the rooms form a circle (a room takes from a room that takes
from it, directly or through others), naming the rooms and, for each of
its edges, the shortest loop back with one call or import of each step;
0 otherwise. --print lists the rooms by layer (a room takes only from rooms
in lower layers), with what each takes from. --doc MD: also fails unless
MD's table rows '| LAYER | `ROOM` | what |' give every room (each source
given, each header room that calls or is called) the layer computed here; with --update, MD's table is written
again from the computed layers (rows ordered by layer, each keeping its
'what'; a room not in the table gets a row with an empty 'what' to fill
in).
"""
import ast
import collections
import os
import re
import sys

NODE = re.compile(r'node: \{ title: "([^"]*)" label: "([^"\\]*)\\n([^":]*):(\d+):\d+"')
EDGE = re.compile(r'edge: \{ sourcename: "([^"]*)" targetname: "([^"]*)" label: "([^":]*):(\d+)')
UNIT = re.compile(r'graph: \{ title: "([^"]*)"')
SOURCES = ('.c',)
HEADERS = ('.h', '.inl')


class House:
    """The directories checked, and the room of each file in them."""

    def __init__(self, dirs):
        self.dirs = set(os.path.realpath(d) for d in dirs)

    def room(self, path):
        """The room of a file, or None when it is outside the house."""
        path = os.path.realpath(path)
        d, name = os.path.split(path)
        if d not in self.dirs:
            return None
        stem, ext = os.path.splitext(name)
        if ext in HEADERS:
            for src in SOURCES:
                if os.path.exists(os.path.join(d, stem + src)):
                    return stem + src
        return name


class Graph:
    """Rooms, and for each pair the first reason one takes from the other."""

    def __init__(self):
        self.nodes = set()
        self.takes = collections.defaultdict(dict)   # A -> {B: why}

    def add(self, a, b, why):
        self.nodes.update((a, b))
        if a != b:
            self.takes[a].setdefault(b, why)


# --- C: calls, from the compiler's call graphs ------------------------------

def read_ci(paths):
    """[(unit source path, definitions, edges)] of each .ci file."""
    units = []
    for ci in paths:
        with open(ci, encoding='utf-8', errors='replace') as f:
            text = f.read()
        m = UNIT.match(text)
        if not m:
            raise SystemExit('layers: %s is not a gcc call graph' % ci)
        unit = m.group(1)
        nodes = {}                   # title -> (function name, file or None)
        for line in text.splitlines():
            m = NODE.search(line)
            if not m:
                continue
            title, name, path = m.group(1), m.group(2), m.group(3)
            if 'shape : ellipse' in line:       # called here, defined elsewhere
                nodes.setdefault(title, (name, None))
            else:
                nodes[title] = (name, path)
        units.append((unit, nodes, EDGE.findall(text)))
    return units


def add_calls(graph, house, units):
    # a global function's title is its name, which is what other units call;
    # a static one's names its unit, and is defined in that unit or a header
    defined = {}
    for _, nodes, _ in units:
        for title, (name, path) in nodes.items():
            if path and title == name and house.room(path):
                defined[name] = path
    for unit, nodes, edges in units:
        graph.nodes.add(house.room(unit))
        for src, dst, site, line in edges:
            # the file of the call site, not of the caller: an inline
            # function's calls are its header's wherever it was inlined
            sname = nodes.get(src, (src, None))[0]
            dname, dpath = nodes.get(dst, (dst, None))
            dpath = dpath or defined.get(dname)
            a, b = house.room(site), dpath and house.room(dpath)
            if a and b:
                graph.add(a, b, 'calls %s (%s:%s, in %s)'
                          % (dname, os.path.basename(site), line, sname))


# --- python: imports ---------------------------------------------------------

def add_imports(graph, paths):
    modules = {os.path.splitext(os.path.basename(p))[0]: p for p in paths}
    for path in paths:
        room = os.path.basename(path)
        graph.nodes.add(room)
        with open(path, encoding='utf-8') as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split('.')[0]
                if top in modules and modules[top] != path:
                    graph.add(room, os.path.basename(modules[top]),
                              'imports %s (%s:%d)'
                              % (top, room, node.lineno))


# --- the check ---------------------------------------------------------------

def circles(graph):
    """Tarjan's strongly connected components of more than one room."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.takes.get(v, {})):
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
    for v in sorted(graph.nodes):
        if v not in index:
            visit(v)
    return out


def loops(graph, comp, most=20):
    """The shortest loop through each edge of a circle, shortest first."""
    inside = set(comp)
    found = {}
    for a in sorted(comp):
        for b in sorted(w for w in graph.takes.get(a, {}) if w in inside):
            back = {b: None}            # breadth-first from b back to a
            queue = collections.deque([b])
            while queue and a not in back:
                v = queue.popleft()
                for w in sorted(graph.takes.get(v, {})):
                    if w in inside and w not in back:
                        back[w] = v
                        queue.append(w)
            path, v = [], a
            while v is not None:
                path.append(v)
                v = back[v]
            loop = [a] + path[::-1][:-1]    # a -> b -> ... -> (a)
            i = loop.index(min(loop))
            loop = loop[i:] + loop[:i]
            found.setdefault(tuple(loop), None)
    return sorted(found, key=lambda l: (len(l), l))[:most]


def layers(graph):
    level = {}

    def depth(v):
        if v not in level:
            level[v] = 0
            level[v] = 1 + max((depth(w) for w in graph.takes.get(v, {})),
                               default=-1)
        return level[v]
    for v in graph.nodes:
        depth(v)
    return level


ROW = re.compile(r'^\| *(\d+) *\| *`([^`]+)` *\|(.*)$')


def read_doc(path):
    with open(path, encoding='utf-8') as f:
        lines = f.read().split('\n')
    rows = [(i, ROW.match(line)) for i, line in enumerate(lines)]
    return lines, [(i, m) for i, m in rows if m]


def check_doc(path, graph, level):
    """Mismatches between MD's table of layers and the computed ones."""
    _, rows = read_doc(path)
    said = {m.group(2): int(m.group(1)) for _, m in rows}
    bad = []
    for v in sorted(graph.nodes):
        if v not in said:
            bad.append('%s: not in the table' % v)
        elif said[v] != level[v]:
            bad.append('%s: layer %d in the table, %d computed'
                       % (v, said[v], level[v]))
    for v in sorted(set(said) - graph.nodes):
        bad.append('%s: in the table, not a room of the house' % v)
    return bad


def update_doc(path, graph, level):
    """MD's table of layers written again from the computed ones."""
    lines, rows = read_doc(path)
    if not rows:
        raise SystemExit('layers: %s has no table of layers' % path)
    what = {m.group(2): m.group(3) for _, m in rows}
    order = {m.group(2): k for k, (_, m) in enumerate(rows)}
    rooms = sorted(graph.nodes, key=lambda v: (level[v], order.get(v, len(order)), v))
    new = ['| %d | `%s` |%s' % (level[v], v, what.get(v, ' |')) for v in rooms]
    first, last = rows[0][0], rows[-1][0]
    if last - first + 1 != len(rows):
        raise SystemExit('layers: %s: the table of layers is not one block' % path)
    lines[first:last + 1] = new
    with open(path, 'w', encoding='utf-8') as f:
        f.write('\n'.join(lines))


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
    cis = [f for f in files if f.endswith('.ci')]
    pys = [f for f in files if f.endswith('.py')]
    units = read_ci(cis)
    house = House([os.path.dirname(u) for u, _, _ in units] +
                  [os.path.dirname(p) for p in pys])
    graph = Graph()
    add_calls(graph, house, units)
    add_imports(graph, pys)
    if not graph.takes:
        print('layers: no room takes from another in %d files: were they '
              'built with -fcallgraph-info?' % len(files))
        return 1
    bad = circles(graph)
    for comp in bad:
        print('circle: %s' % ' '.join(comp))
        for loop in loops(graph, comp):
            print('  loop: %s' % ' -> '.join(loop + (loop[0],)))
            for a, b in zip(loop, loop[1:] + (loop[0],)):
                print('    %s -> %s: %s' % (a, b, graph.takes[a][b]))
    if bad:
        print('layers: %d circle(s) between rooms: a lower room may reach a '
              'higher one only through a callback or an event' % len(bad))
        return 1
    level = layers(graph)
    if doc and '--update' in opts:
        update_doc(doc, graph, level)
    elif doc:
        bad = check_doc(doc, graph, level)
        for b in bad:
            print('%s: %s' % (doc, b))
        if bad:
            print('layers: %s does not show the layers the code has '
                  '(--update writes them)' % doc)
            return 1
    if '--print' in opts:
        for lv in sorted(set(level.values())):
            for v in sorted(n for n in graph.nodes if level[n] == lv):
                print('%d %-24s %s' % (lv, v, ' '.join(sorted(graph.takes.get(v, {})))))
    if '--dot' in opts:
        print('digraph layers {')
        for a in sorted(graph.takes):
            for b in sorted(graph.takes[a]):
                print('  "%s" -> "%s";' % (a, b))
        print('}')
    print('layers: %d rooms, %d edges between them, no circle'
          % (len(graph.nodes), sum(len(b) for b in graph.takes.values())))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
