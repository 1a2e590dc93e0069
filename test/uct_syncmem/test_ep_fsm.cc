// SPDX-License-Identifier: BSD-3-Clause
// The endpoint's state machine (uct_syncmem/syncmem_ep_fsm.c): every cell
// of the table in that file's header, read from it, for every value of the
// guards' inputs; the notes' cells one by one; doc/design.md showing the
// same table; whole lives of an endpoint. Pure: no device, no endpoint.
#include <gtest/gtest.h>

extern "C" {
#include <uct_syncmem/syncmem_ep_fsm.h>
}

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

typedef uct_syncmem_ep_fsm_in_t in_t;

#define S(_name) UCT_SYNCMEM_EP_##_name
#define E(_name) UCT_SYNCMEM_EP_EV_##_name
#define A(_name) UCT_SYNCMEM_EP_ACT_##_name

const unsigned num_inputs = 10;

in_t inputs(unsigned bits)
{
    in_t in;
    in.reconnect     = !!(bits & 1);
    in.recoverable   = !!(bits & 2);
    in.outstanding   = !!(bits & 4);
    in.resume_asked  = !!(bits & 8);
    in.rep_resumed   = !!(bits & 16);
    in.retry_due     = !!(bits & 32);
    in.past_deadline = !!(bits & 64);
    in.last_try_sent = !!(bits & 128);
    in.tries_left    = !!(bits & 256);
    in.peer_gone     = !!(bits & 512);
    return in;
}

// reconnect on, a link error, requests outstanding, nothing due
in_t quiet_in()
{
    in_t in = inputs(0);
    in.reconnect   = 1;
    in.recoverable = 1;
    in.outstanding = 1;
    in.tries_left  = 1;
    return in;
}

std::string describe(const in_t &in)
{
    std::ostringstream os;
    os << "reconnect " << +in.reconnect << " recoverable " << +in.recoverable
       << " outstanding " << +in.outstanding << " resume_asked "
       << +in.resume_asked << " rep_resumed " << +in.rep_resumed
       << " retry_due " << +in.retry_due << " past_deadline "
       << +in.past_deadline << " last_try_sent " << +in.last_try_sent
       << " tries_left " << +in.tries_left << " peer_gone "
       << +in.peer_gone;
    return os.str();
}

struct outcome {
    uct_syncmem_ep_act_t act;
    uint8_t              next;
};

outcome next(uint8_t state, uct_syncmem_ep_ev_t ev, const in_t &in)
{
    outcome o;
    o.next = state;
    o.act  = uct_syncmem_ep_fsm_next(&o.next, ev, &in);
    return o;
}

std::string where(uint8_t state, uct_syncmem_ep_ev_t ev, const in_t &in)
{
    return std::string(uct_syncmem_ep_state_names[state]) + " + " +
           uct_syncmem_ep_ev_names[ev] + " (" + describe(in) + ")";
}

// Every input value: the cell must give what rule says.
void expect_cell(uint8_t state, uct_syncmem_ep_ev_t ev,
                 const std::function<outcome(const in_t&)> &rule)
{
    for (unsigned bits = 0; bits < (1u << num_inputs); ++bits) {
        in_t in    = inputs(bits);
        outcome o  = next(state, ev, in);
        outcome ex = rule(in);
        ASSERT_EQ(uct_syncmem_ep_act_names[ex.act],
                  std::string(uct_syncmem_ep_act_names[o.act]))
                << where(state, ev, in);
        ASSERT_EQ(uct_syncmem_ep_state_names[ex.next],
                  std::string(uct_syncmem_ep_state_names[o.next]))
                << where(state, ev, in);
    }
}

outcome go(uct_syncmem_ep_act_t act, uint8_t next)
{
    return { act, next };
}

int find_name(const char **names, const std::string &name)
{
    for (int i = 0; names[i] != nullptr; ++i) {
        if (name == names[i]) {
            return i;
        }
    }
    return -1;
}

std::vector<std::string> read_lines(const std::string &path)
{
    std::ifstream f(path);
    std::vector<std::string> lines;
    std::string line;

    while (std::getline(f, line)) {
        lines.push_back(line);
    }
    return lines;
}

std::string rstrip(const std::string &s)
{
    size_t end = s.find_last_not_of(" \t");
    return (end == std::string::npos) ? "" : s.substr(0, end + 1);
}

// The table in the source's header comment: from the first grid to the
// line before "An action that fails", without the comment's " * ".
std::vector<std::string> source_table()
{
    std::vector<std::string> all = read_lines(SYNCMEM_SRCDIR
                                              "/uct_syncmem/syncmem_ep_fsm.c");
    std::vector<std::string> table;
    bool in = false;

    for (const std::string &l : all) {
        std::string text = (l.compare(0, 3, " * ") == 0) ? l.substr(3) :
                           (rstrip(l) == " *") ? "" : l;
        if (text.find("event \\ state") != std::string::npos) {
            in = true;
        }
        if (text.compare(0, 20, "An action that fails") == 0) {
            break;
        }
        if (in) {
            table.push_back(rstrip(text));
        }
    }
    while (!table.empty() && table.back().empty()) {
        table.pop_back();
    }
    return table;
}

// The fenced block of doc/design.md that holds the grids.
std::vector<std::string> design_table()
{
    std::vector<std::string> all = read_lines(SYNCMEM_SRCDIR "/doc/design.md");
    std::vector<std::string> block;
    bool fenced = false, found = false;

    for (const std::string &l : all) {
        if (l.compare(0, 3, "```") == 0) {
            if (fenced && found) {
                break;
            }
            fenced = !fenced;
            block.clear();
            continue;
        }
        if (fenced) {
            block.push_back(rstrip(l));
            found = found || (l.find("event \\ state") != std::string::npos);
        }
    }
    return found ? block : std::vector<std::string>();
}

struct cell {
    bool        guarded;  // "(x)": a note decides
    std::string act;      // "" with no action
    std::string next;     // "" for the same state
};

// (state, event) -> cell, from the grids of the table.
std::map<std::pair<int, int>, cell> parse(const std::vector<std::string> &t)
{
    std::map<std::pair<int, int>, cell> cells;
    std::vector<size_t> cols;
    std::vector<int> states;
    std::vector<std::string> row; // the event's lines
    size_t label = 0;
    int ev       = -1;

    auto flush = [&]() {
        for (size_t c = 0; (ev >= 0) && (c < states.size()); ++c) {
            std::string text;
            for (const std::string &l : row) {
                size_t from = cols[c];
                size_t to   = (c + 1 < cols.size()) ? cols[c + 1] :
                                                      std::string::npos;
                if (from < l.size()) {
                    text += " " + l.substr(from, to - from);
                }
            }
            std::istringstream words(text);
            std::string w;
            cell ce = { false, "", "" };
            while (words >> w) {
                if (w[0] == '(') {
                    ce.guarded = true;
                } else if (w[0] == '>') {
                    ce.next = w.substr(1);
                } else if (w != "-") {
                    ce.act = w;
                }
            }
            auto key = std::make_pair(states[c], ev);
            EXPECT_EQ(0u, cells.count(key))
                    << "twice: " << uct_syncmem_ep_state_names[states[c]]
                    << " + " << uct_syncmem_ep_ev_names[ev];
            cells[key] = ce;
        }
        ev = -1;
        row.clear();
    };

    for (const std::string &l : t) {
        if (l.find("event \\ state") != std::string::npos) {
            flush();
            label = l.find("event");
            cols.clear();
            states.clear();
            std::string head = l.substr(l.find("state") + 5);
            size_t off       = l.size() - head.size();
            std::istringstream words(head);
            std::string w;
            while (words >> w) {
                cols.push_back(off + head.find(w));
                head.replace(head.find(w), w.size(), std::string(w.size(), ' '));
                states.push_back(find_name(uct_syncmem_ep_state_names, w));
                EXPECT_GE(states.back(), 0) << "no state " << w;
            }
            continue;
        }
        if (l.empty() || cols.empty()) {
            flush();
            cols.clear();
            continue;
        }
        if ((l.size() > label) && (l[label] != ' ')) {
            flush();
            std::string name = l.substr(label, l.find(' ', label) - label);
            ev               = find_name(uct_syncmem_ep_ev_names, name);
            EXPECT_GE(ev, 0) << "no event " << name;
        }
        row.push_back(l);
    }
    flush();
    return cells;
}

} // namespace

TEST(ep_fsm, names_are_complete)
{
    for (int s = 0; s < UCT_SYNCMEM_EP_STATE_LAST; ++s) {
        EXPECT_NE(nullptr, uct_syncmem_ep_state_names[s]) << s;
    }
    for (int e = 0; e < UCT_SYNCMEM_EP_EV_LAST; ++e) {
        EXPECT_NE(nullptr, uct_syncmem_ep_ev_names[e]) << e;
    }
    for (int a = 0; a < UCT_SYNCMEM_EP_ACT_LAST; ++a) {
        EXPECT_NE(nullptr, uct_syncmem_ep_act_names[a]) << a;
    }
}

// The table as written, cell by cell, for every input: a plain cell never
// depends on the inputs; "-" changes nothing.
TEST(ep_fsm, every_cell_of_the_table)
{
    std::vector<std::string> table = source_table();
    ASSERT_GT(table.size(), 20u) << "no table in syncmem_ep_fsm.c";
    auto cells = parse(table);

    for (int s = 0; s < UCT_SYNCMEM_EP_STATE_LAST; ++s) {
        for (int e = 0; e < UCT_SYNCMEM_EP_EV_LAST; ++e) {
            auto it = cells.find({ s, e });
            ASSERT_NE(cells.end(), it)
                    << "no cell " << uct_syncmem_ep_state_names[s] << " + "
                    << uct_syncmem_ep_ev_names[e];
            if (it->second.guarded) {
                continue; // the notes' tests below
            }
            int act  = it->second.act.empty() ? A(NONE) :
                       find_name(uct_syncmem_ep_act_names, it->second.act);
            int next = it->second.next.empty() ? s :
                       find_name(uct_syncmem_ep_state_names, it->second.next);
            ASSERT_GE(act, 0) << it->second.act;
            ASSERT_GE(next, 0) << it->second.next;
            expect_cell(s, (uct_syncmem_ep_ev_t)e, [&](const in_t&) {
                return go((uct_syncmem_ep_act_t)act, next);
            });
        }
    }
    // and nothing beyond the states
    for (int e = 0; e < UCT_SYNCMEM_EP_EV_LAST; ++e) {
        outcome o = next(S(STATE_LAST), (uct_syncmem_ep_ev_t)e, quiet_in());
        EXPECT_EQ(A(NONE), o.act) << uct_syncmem_ep_ev_names[e];
        EXPECT_EQ(S(STATE_LAST), o.next) << uct_syncmem_ep_ev_names[e];
    }
}

TEST(ep_fsm, design_md_shows_the_same_table)
{
    std::vector<std::string> doc = design_table(), src = source_table();

    ASSERT_FALSE(doc.empty()) << "no table in doc/design.md";
    EXPECT_EQ(src, doc);
}

// (c): the first connect's timer
TEST(ep_fsm, connecting_timer)
{
    expect_cell(S(CONNECTING), E(TIMER), [](const in_t &in) {
        if (!in.retry_due) {
            return go(A(NONE), S(CONNECTING));
        }
        return in.tries_left ? go(A(RESEND), S(CONNECTING)) :
                               go(A(FAIL), S(FAILED));
    });
}

// (e): a failed completion reconnects only a link error with reconnect on,
// to a peer whose iface did not say it closed
TEST(ep_fsm, connected_error)
{
    expect_cell(S(CONNECTED), E(ERROR), [](const in_t &in) {
        return (in.reconnect && in.recoverable && !in.peer_gone) ?
               go(A(START), S(RECONN_WAIT_BOTH)) : go(A(FAIL), S(FAILED));
    });
}

// (d): an idle endpoint, or reconnect off, is left alone
TEST(ep_fsm, connected_port_down)
{
    expect_cell(S(CONNECTED), E(PORT_DOWN), [](const in_t &in) {
        return go((in.reconnect && in.outstanding) ? A(QP_ERROR) : A(NONE),
                  S(CONNECTED));
    });
}

// (r), (f): resumed only if asked and the peer kept the same QP
TEST(ep_fsm, rep_resumes_only_if_asked)
{
    expect_cell(S(RECONN_WAIT_BOTH), E(REP), [](const in_t &in) {
        return go(A(NONE), (in.resume_asked && in.rep_resumed) ?
                           S(RECONN_DRAIN_RESUME) : S(RECONN_DRAIN_NEW));
    });
    expect_cell(S(RECONN_WAIT_REP), E(REP), [](const in_t &in) {
        return go((in.resume_asked && in.rep_resumed) ? A(FINISH_RESUME) :
                                                        A(FINISH_NEW_QP),
                  S(CONNECTED));
    });
}

// (a): asking until the deadline, and once more after it
TEST(ep_fsm, reconnect_timer_asking)
{
    for (uint8_t st : { S(RECONN_WAIT_BOTH), S(RECONN_WAIT_REP) }) {
        expect_cell(st, E(TIMER), [st](const in_t &in) {
            if (!in.past_deadline) {
                return go(in.retry_due ? A(SEND_REQ) : A(NONE), st);
            }
            if (!in.last_try_sent) {
                return go(A(SEND_REQ), st); // the last try
            }
            return in.retry_due ? go(A(FAIL_PURGE), S(FAILED)) :
                                  go(A(NONE), st); // its answer may come
        });
    }
}

// (b): answered, but the old QP never drained
TEST(ep_fsm, reconnect_timer_draining)
{
    for (uint8_t st : { S(RECONN_DRAIN_NEW), S(RECONN_DRAIN_RESUME) }) {
        expect_cell(st, E(TIMER), [st](const in_t &in) {
            return in.past_deadline ? go(A(FAIL_PURGE), S(FAILED)) :
                                      go(A(NONE), st);
        });
    }
}

namespace {

struct step {
    uct_syncmem_ep_ev_t  ev;
    uct_syncmem_ep_act_t act;
    uint8_t              state; // after it
};

void walk(uint8_t state, const std::vector<step> &steps, const in_t &in)
{
    for (size_t i = 0; i < steps.size(); ++i) {
        outcome o = next(state, steps[i].ev, in);
        EXPECT_EQ(uct_syncmem_ep_act_names[steps[i].act],
                  std::string(uct_syncmem_ep_act_names[o.act]))
                << "step " << i << ": " << where(state, steps[i].ev, in);
        EXPECT_EQ(uct_syncmem_ep_state_names[steps[i].state],
                  std::string(uct_syncmem_ep_state_names[o.next]))
                << "step " << i << ": " << where(state, steps[i].ev, in);
        state = o.next;
    }
}

} // namespace

TEST(ep_fsm, connect)
{
    in_t in = quiet_in();
    walk(S(CONNECTING), { { E(TIMER), A(NONE), S(CONNECTING) },
                          { E(PORT_UP), A(NONE), S(CONNECTING) },
                          { E(REP), A(CONNECT), S(CONNECTED) },
                          { E(REP), A(NONE), S(CONNECTED) }, // duplicate
                          { E(TIMER), A(NONE), S(CONNECTED) } }, in);
    in.retry_due = 1;
    walk(S(CONNECTING), { { E(TIMER), A(RESEND), S(CONNECTING) } }, in);
    in.tries_left = 0;
    walk(S(CONNECTING), { { E(TIMER), A(FAIL), S(FAILED) },
                          { E(REP), A(NONE), S(FAILED) }, // too late
                          { E(ERROR), A(RETIRE), S(FAILED) },
                          { E(DESTROY), A(NONE), S(FAILED) } }, in);
    // the QP refused the REP's
    walk(S(CONNECTING), { { E(CONNECT_FAILED), A(FAIL), S(FAILED) } }, in);
}

// a peer whose iface closed: its GONE fails a (re)connecting endpoint at
// once, and a connected one at its first failed request, unreconnected
TEST(ep_fsm, peer_gone)
{
    in_t in = quiet_in();
    walk(S(CONNECTED), { { E(GONE), A(NONE), S(CONNECTED) },
                         { E(ERROR), A(START), S(RECONN_WAIT_BOTH) },
                         { E(GONE), A(FAIL_PURGE), S(FAILED) },
                         { E(GONE), A(NONE), S(FAILED) } }, in);
    walk(S(CONNECTED), { { E(ERROR), A(START), S(RECONN_WAIT_BOTH) },
                         { E(DRAINED), A(NONE), S(RECONN_WAIT_REP) },
                         { E(GONE), A(FAIL_PURGE), S(FAILED) } }, in);
    walk(S(CONNECTING), { { E(GONE), A(FAIL), S(FAILED) } }, in);
    in.peer_gone = 1;
    walk(S(CONNECTED), { { E(GONE), A(NONE), S(CONNECTED) },
                         { E(ERROR), A(FAIL), S(FAILED) },
                         { E(ERROR), A(RETIRE), S(FAILED) } }, in);
}

TEST(ep_fsm, error_drain_then_rep_finishes_on_a_new_qp)
{
    in_t in = quiet_in();
    walk(S(CONNECTED), { { E(ERROR), A(START), S(RECONN_WAIT_BOTH) },
                         { E(ERROR), A(NONE), S(RECONN_WAIT_BOTH) },
                         { E(STALL), A(NONE), S(RECONN_WAIT_BOTH) },
                         { E(PORT_DOWN), A(NONE), S(RECONN_WAIT_BOTH) },
                         { E(PORT_UP), A(SEND_REQ), S(RECONN_WAIT_BOTH) },
                         { E(DRAINED), A(NONE), S(RECONN_WAIT_REP) },
                         { E(TIMER), A(NONE), S(RECONN_WAIT_REP) },
                         { E(REP), A(FINISH_NEW_QP), S(CONNECTED) } }, in);
    // the REP first
    walk(S(CONNECTED), { { E(ERROR), A(START), S(RECONN_WAIT_BOTH) },
                         { E(REP), A(NONE), S(RECONN_DRAIN_NEW) },
                         { E(REP), A(NONE), S(RECONN_DRAIN_NEW) },
                         { E(PORT_UP), A(NONE), S(RECONN_DRAIN_NEW) },
                         { E(DRAINED), A(FINISH_NEW_QP), S(CONNECTED) } },
         in);
}

TEST(ep_fsm, error_to_resume)
{
    in_t in = quiet_in();
    in.resume_asked = 1;
    in.rep_resumed  = 1;
    walk(S(CONNECTED), { { E(ERROR), A(START), S(RECONN_WAIT_BOTH) },
                         { E(REP), A(NONE), S(RECONN_DRAIN_RESUME) },
                         { E(DRAINED), A(FINISH_RESUME), S(CONNECTED) } },
         in);
    walk(S(CONNECTED), { { E(ERROR), A(START), S(RECONN_WAIT_BOTH) },
                         { E(DRAINED), A(NONE), S(RECONN_WAIT_REP) },
                         { E(REP), A(FINISH_RESUME), S(CONNECTED) } }, in);
    // the peer kept its QP, but this REQ did not ask (after a stall)
    in.resume_asked = 0;
    walk(S(CONNECTED), { { E(ERROR), A(START), S(RECONN_WAIT_BOTH) },
                         { E(REP), A(NONE), S(RECONN_DRAIN_NEW) },
                         { E(DRAINED), A(FINISH_NEW_QP), S(CONNECTED) } },
         in);
}

// FINISH failed: the state it was decided in hears CONNECT_FAILED (the
// executor keeps it), and a new generation's REP finishes.
TEST(ep_fsm, finish_failed_restarts)
{
    in_t in = quiet_in();
    for (uint8_t decided : { S(RECONN_WAIT_REP), S(RECONN_DRAIN_NEW),
                             S(RECONN_DRAIN_RESUME) }) {
        walk(decided, { { E(CONNECT_FAILED), A(RESTART),
                          S(RECONN_WAIT_REP) },
                        { E(TIMER), A(NONE), S(RECONN_WAIT_REP) },
                        { E(REP), A(FINISH_NEW_QP), S(CONNECTED) } }, in);
    }
    // nothing was connected yet that could fail
    walk(S(RECONN_WAIT_BOTH), { { E(CONNECT_FAILED), A(NONE),
                                  S(RECONN_WAIT_BOTH) } }, in);
}

// The deadline fails the endpoint from each waiting state, and the machine
// ends in FAILED (nothing stale: a late REP or drain changes nothing).
TEST(ep_fsm, deadline_fails_from_each_wait)
{
    in_t in = quiet_in();
    in.past_deadline = 1;
    in.last_try_sent = 1;
    in.retry_due     = 1;
    for (uint8_t st : { S(RECONN_WAIT_BOTH), S(RECONN_WAIT_REP),
                        S(RECONN_DRAIN_NEW), S(RECONN_DRAIN_RESUME) }) {
        walk(st, { { E(TIMER), A(FAIL_PURGE), S(FAILED) },
                   { E(REP), A(NONE), S(FAILED) },
                   { E(DRAINED), A(NONE), S(FAILED) },
                   { E(CONNECT_FAILED), A(NONE), S(FAILED) },
                   { E(TIMER), A(NONE), S(FAILED) },
                   { E(PORT_UP), A(NONE), S(FAILED) } }, in);
    }
}

// The operation deadline (and any other failure) while reconnecting leaves
// FAILED with the ops of unknown outcome failed: no wait state survives it
// to finish a failed endpoint when the old QP drains.
TEST(ep_fsm, op_deadline_while_reconnecting)
{
    in_t in = quiet_in();
    walk(S(CONNECTED), { { E(ERROR), A(START), S(RECONN_WAIT_BOTH) },
                         { E(REP), A(NONE), S(RECONN_DRAIN_NEW) },
                         { E(FAIL), A(FAIL_PURGE), S(FAILED) },
                         { E(DRAINED), A(NONE), S(FAILED) },
                         { E(FAIL), A(NONE), S(FAILED) } }, in);
    walk(S(CONNECTED), { { E(FAIL), A(FAIL), S(FAILED) },
                         { E(ERROR), A(RETIRE), S(FAILED) },
                         { E(CANCEL), A(NONE), S(FAILED) } }, in);
}

TEST(ep_fsm, cancel_and_destroy)
{
    in_t in = quiet_in();
    walk(S(CONNECTED), { { E(CANCEL), A(CANCEL), S(FAILED) },
                         { E(ERROR), A(RETIRE), S(FAILED) },
                         { E(FAIL), A(NONE), S(FAILED) } }, in);
    walk(S(RECONN_WAIT_REP), { { E(CANCEL), A(CANCEL_PURGE), S(FAILED) } },
         in);
    walk(S(RECONN_DRAIN_RESUME), { { E(DESTROY), A(NONE), S(FAILED) } }, in);
}

// With reconnect off a link error fails the endpoint; a stall still moves
// the QP to error (its flushes then fail the endpoint)
TEST(ep_fsm, reconnect_off)
{
    in_t in = quiet_in();
    in.reconnect = 0;
    walk(S(CONNECTED), { { E(STALL), A(QP_ERROR), S(CONNECTED) },
                         { E(PORT_DOWN), A(NONE), S(CONNECTED) },
                         { E(ERROR), A(FAIL), S(FAILED) },
                         { E(ERROR), A(RETIRE), S(FAILED) } }, in);
}

// What the peer's PSN says of the PSNs first..end - 1 (24 bits, modulo).
TEST(ep_fsm, peer_ran)
{
    EXPECT_EQ(0, uct_syncmem_ep_fsm_peer_ran(100, 110, 100));
    EXPECT_EQ(4, uct_syncmem_ep_fsm_peer_ran(100, 110, 104));
    EXPECT_EQ(10, uct_syncmem_ep_fsm_peer_ran(100, 110, 110));
    EXPECT_EQ(-1, uct_syncmem_ep_fsm_peer_ran(100, 110, 111));
    EXPECT_EQ(-1, uct_syncmem_ep_fsm_peer_ran(100, 110, 99));
    EXPECT_EQ(-1, uct_syncmem_ep_fsm_peer_ran(100, 110, 0));
    EXPECT_EQ(0, uct_syncmem_ep_fsm_peer_ran(5, 5, 5));
    EXPECT_EQ(-1, uct_syncmem_ep_fsm_peer_ran(5, 5, 6));
    // across the wrap: 0xfffffe, 0xffffff, 0, 1
    EXPECT_EQ(0, uct_syncmem_ep_fsm_peer_ran(0xfffffe, 2, 0xfffffe));
    EXPECT_EQ(2, uct_syncmem_ep_fsm_peer_ran(0xfffffe, 2, 0));
    EXPECT_EQ(4, uct_syncmem_ep_fsm_peer_ran(0xfffffe, 2, 2));
    EXPECT_EQ(-1, uct_syncmem_ep_fsm_peer_ran(0xfffffe, 2, 3));
    EXPECT_EQ(-1, uct_syncmem_ep_fsm_peer_ran(0xfffffe, 2, 0xfffffd));
}

// How long a request may go without progress before its QP is taken for
// wedged: explicit times as set, doubled per stall of the same request up
// to 32 times; 'auto' (calm > 1) calm times longer unless the port showed
// link trouble within the window.
TEST(ep_fsm, stall_time)
{
    const uint64_t t = 2000, window = 60000, now = 1000000;

    for (unsigned stalls = 0; stalls < 8; ++stalls) {
        uint64_t doubled = t << std::min(stalls, 5u);
        // set by the user: the same with or without trouble
        EXPECT_EQ(doubled, uct_syncmem_ep_fsm_stall_time(t, 1, 0, window,
                                                         now, stalls));
        EXPECT_EQ(doubled, uct_syncmem_ep_fsm_stall_time(t, 1, now - 1,
                                                         window, now, stalls));
        // auto: no trouble ever, trouble long ago, trouble just now
        EXPECT_EQ(8 * doubled, uct_syncmem_ep_fsm_stall_time(t, 8, 0, window,
                                                             now, stalls));
        EXPECT_EQ(8 * doubled,
                  uct_syncmem_ep_fsm_stall_time(t, 8, now - window, window,
                                                now, stalls));
        EXPECT_EQ(doubled,
                  uct_syncmem_ep_fsm_stall_time(t, 8, now - window + 1,
                                                window, now, stalls));
        EXPECT_EQ(doubled, uct_syncmem_ep_fsm_stall_time(t, 8, now, window,
                                                         now, stalls));
    }
}

// When a reconnect gives up: RECONNECT_TIMEOUT after it started, or after
// the time the stall that started it was allowed if that is longer; 'inf'
// (and a sum past the clock's end) never.
TEST(ep_fsm, reconnect_deadline)
{
    const uint64_t start = 1000000, inf = UINT64_MAX;

    EXPECT_EQ(start + 5000, uct_syncmem_ep_fsm_reconnect_deadline(start, 5000,
                                                                  0));
    EXPECT_EQ(start + 5000,
              uct_syncmem_ep_fsm_reconnect_deadline(start, 5000, 2100));
    EXPECT_EQ(start + 5000,
              uct_syncmem_ep_fsm_reconnect_deadline(start, 5000, 5000));
    EXPECT_EQ(start + 17200,
              uct_syncmem_ep_fsm_reconnect_deadline(start, 5000, 17200));
    EXPECT_EQ(start, uct_syncmem_ep_fsm_reconnect_deadline(start, 0, 0));
    EXPECT_EQ(inf, uct_syncmem_ep_fsm_reconnect_deadline(start, inf, 0));
    EXPECT_EQ(inf, uct_syncmem_ep_fsm_reconnect_deadline(start, inf, 17200));
    EXPECT_EQ(inf, uct_syncmem_ep_fsm_reconnect_deadline(start, 5000, inf));
    EXPECT_EQ(inf, uct_syncmem_ep_fsm_reconnect_deadline(inf - 10, 5000, 0));
}

// A request the peer refused as invalid: a reconnect the first time, and
// for another request after it; the same request refused again fails the
// endpoint (16-bit request numbers, across their wrap too).
TEST(ep_fsm, retry_refusal)
{
    EXPECT_TRUE(uct_syncmem_ep_fsm_retry_refusal(0, 0, 0));
    EXPECT_TRUE(uct_syncmem_ep_fsm_retry_refusal(0, 22, 22));
    EXPECT_FALSE(uct_syncmem_ep_fsm_retry_refusal(1, 22, 22));
    EXPECT_TRUE(uct_syncmem_ep_fsm_retry_refusal(1, 22, 23));
    EXPECT_TRUE(uct_syncmem_ep_fsm_retry_refusal(1, 22, 21));
    EXPECT_FALSE(uct_syncmem_ep_fsm_retry_refusal(1, 0xffff, 0xffff));
    EXPECT_TRUE(uct_syncmem_ep_fsm_retry_refusal(1, 0xffff, 0));
}
