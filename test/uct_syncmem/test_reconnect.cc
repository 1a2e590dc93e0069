// SPDX-License-Identifier: BSD-3-Clause
// The reconnect state machine (uct_syncmem/syncmem_reconnect.c): every
// state and event, against the transition table in that file's header.
// Pure: no device, no endpoint.
#include <gtest/gtest.h>

extern "C" {
#include <uct_syncmem/syncmem.h>
}

#include <string>

namespace {

const uct_syncmem_rc_timer_t quiet  = { 0, 0, 0 }; // nothing due
const uct_syncmem_rc_timer_t due    = { 1, 0, 0 }; // CM_TIMEOUT passed
const uct_syncmem_rc_timer_t late   = { 0, 1, 0 }; // past the deadline
const uct_syncmem_rc_timer_t asked  = { 0, 1, 1 }; // ...the last REQ out
const uct_syncmem_rc_timer_t gaveup = { 1, 1, 1 }; // ...and its time up

struct step {
    uint8_t                 state;
    uct_syncmem_rc_event_t  event;
    uct_syncmem_rc_timer_t  timer;
    uct_syncmem_rc_action_t action;
    uint8_t                 next;
};

std::string name(const step &s)
{
    static const char *states[] = { "IDLE", "WAIT_BOTH", "WAIT_REP",
                                    "WAIT_DRAIN" };
    static const char *events[] = { "ERROR", "STALL", "DRAINED", "REP",
                                    "TIMER", "CONNECT_FAILED", "PORT_DOWN",
                                    "PORT_UP" };
    return std::string(states[s.state]) + " + " + events[s.event] +
           " (timer " + std::to_string(s.timer.retry_due) +
           std::to_string(s.timer.past_deadline) +
           std::to_string(s.timer.last_try_sent) + ")";
}

void expect(const step &s)
{
    uint8_t state = s.state;
    EXPECT_EQ(s.action, uct_syncmem_rc_next(&state, s.event, &s.timer))
            << name(s);
    EXPECT_EQ(s.next, state) << name(s);
}

} // namespace

#define S(_name) UCT_SYNCMEM_RC_##_name
#define E(_name) UCT_SYNCMEM_RC_EV_##_name
#define A(_name) UCT_SYNCMEM_RC_ACT_##_name

TEST(reconnect_fsm, idle)
{
    expect({ S(IDLE), E(ERROR), quiet, A(START), S(WAIT_BOTH) });
    expect({ S(IDLE), E(STALL), quiet, A(QP_ERROR), S(IDLE) });
    expect({ S(IDLE), E(PORT_DOWN), quiet, A(QP_ERROR), S(IDLE) });
    // nothing else moves a working endpoint: stray flushes, late REPs
    for (auto ev : { E(DRAINED), E(REP), E(TIMER), E(CONNECT_FAILED),
                     E(PORT_UP) }) {
        for (auto t : { quiet, due, late, gaveup }) {
            expect({ S(IDLE), ev, t, A(NONE), S(IDLE) });
        }
    }
}

TEST(reconnect_fsm, waiting_for_both)
{
    expect({ S(WAIT_BOTH), E(DRAINED), quiet, A(NONE), S(WAIT_REP) });
    expect({ S(WAIT_BOTH), E(REP), quiet, A(NONE), S(WAIT_DRAIN) });
    // already reconnecting: another error or stall changes nothing
    expect({ S(WAIT_BOTH), E(ERROR), quiet, A(NONE), S(WAIT_BOTH) });
    expect({ S(WAIT_BOTH), E(STALL), quiet, A(NONE), S(WAIT_BOTH) });
    // nothing was connected yet that could fail
    expect({ S(WAIT_BOTH), E(CONNECT_FAILED), quiet, A(NONE), S(WAIT_BOTH) });
    // the port: down again changes nothing, back up asks now
    expect({ S(WAIT_BOTH), E(PORT_DOWN), quiet, A(NONE), S(WAIT_BOTH) });
    expect({ S(WAIT_BOTH), E(PORT_UP), quiet, A(SEND_REQ), S(WAIT_BOTH) });
}

// (a) of the table, the same without the REP whether drained or not
TEST(reconnect_fsm, asking_until_the_deadline_and_once_more)
{
    for (uint8_t st : { S(WAIT_BOTH), S(WAIT_REP) }) {
        expect({ st, E(TIMER), quiet, A(NONE), st });
        expect({ st, E(TIMER), due, A(SEND_REQ), st });
        expect({ st, E(TIMER), late, A(SEND_REQ), st });   // the last try
        expect({ st, E(TIMER), { 1, 1, 0 }, A(SEND_REQ), st });
        expect({ st, E(TIMER), asked, A(NONE), st });      // its answer
        expect({ st, E(TIMER), gaveup, A(FAIL), st });
        // a REP still counts after the deadline
    }
}

TEST(reconnect_fsm, waiting_for_the_rep)
{
    expect({ S(WAIT_REP), E(REP), quiet, A(FINISH), S(IDLE) });
    expect({ S(WAIT_REP), E(REP), gaveup, A(FINISH), S(IDLE) });
    expect({ S(WAIT_REP), E(DRAINED), quiet, A(NONE), S(WAIT_REP) });
    expect({ S(WAIT_REP), E(ERROR), quiet, A(NONE), S(WAIT_REP) });
    expect({ S(WAIT_REP), E(STALL), quiet, A(NONE), S(WAIT_REP) });
    // connecting after the REP failed: a new generation
    expect({ S(WAIT_REP), E(CONNECT_FAILED), quiet, A(RESTART), S(WAIT_REP) });
    expect({ S(WAIT_REP), E(CONNECT_FAILED), late, A(RESTART), S(WAIT_REP) });
    expect({ S(WAIT_REP), E(PORT_DOWN), quiet, A(NONE), S(WAIT_REP) });
    expect({ S(WAIT_REP), E(PORT_UP), quiet, A(SEND_REQ), S(WAIT_REP) });
}

// (b) of the table
TEST(reconnect_fsm, waiting_for_the_drain)
{
    expect({ S(WAIT_DRAIN), E(DRAINED), quiet, A(FINISH), S(IDLE) });
    expect({ S(WAIT_DRAIN), E(REP), quiet, A(NONE), S(WAIT_DRAIN) });
    expect({ S(WAIT_DRAIN), E(ERROR), quiet, A(NONE), S(WAIT_DRAIN) });
    expect({ S(WAIT_DRAIN), E(STALL), quiet, A(NONE), S(WAIT_DRAIN) });
    expect({ S(WAIT_DRAIN), E(TIMER), quiet, A(NONE), S(WAIT_DRAIN) });
    expect({ S(WAIT_DRAIN), E(TIMER), due, A(NONE), S(WAIT_DRAIN) });
    expect({ S(WAIT_DRAIN), E(TIMER), late, A(FAIL), S(WAIT_DRAIN) });
    expect({ S(WAIT_DRAIN), E(CONNECT_FAILED), quiet, A(RESTART),
             S(WAIT_REP) });
    // answered already: the port's news changes nothing
    expect({ S(WAIT_DRAIN), E(PORT_DOWN), quiet, A(NONE), S(WAIT_DRAIN) });
    expect({ S(WAIT_DRAIN), E(PORT_UP), quiet, A(NONE), S(WAIT_DRAIN) });
}

// The paths of a whole reconnect, in both orders of REP and drain, with a
// failed connect in between.
TEST(reconnect_fsm, whole_reconnects)
{
    struct { uct_syncmem_rc_event_t ev; uct_syncmem_rc_action_t act; }
    drain_first[] = { { E(ERROR), A(START) }, { E(TIMER), A(NONE) },
                      { E(DRAINED), A(NONE) }, { E(REP), A(FINISH) } },
    rep_first[]   = { { E(ERROR), A(START) }, { E(REP), A(NONE) },
                      { E(DRAINED), A(FINISH) } },
    refused[]     = { { E(ERROR), A(START) }, { E(DRAINED), A(NONE) },
                      { E(REP), A(FINISH) }, { E(CONNECT_FAILED), A(NONE) } };
    uint8_t state = S(IDLE);

    for (auto &s : drain_first) {
        EXPECT_EQ(s.act, uct_syncmem_rc_next(&state, s.ev, &quiet));
    }
    EXPECT_EQ(S(IDLE), state);
    for (auto &s : rep_first) {
        EXPECT_EQ(s.act, uct_syncmem_rc_next(&state, s.ev, &quiet));
    }
    EXPECT_EQ(S(IDLE), state);

    // FINISH failed: the state before it takes CONNECT_FAILED (the
    // executor keeps it), and a new REP finishes
    for (auto &s : refused) {
        uint8_t before = state;
        EXPECT_EQ(s.act, uct_syncmem_rc_next(&state, s.ev, &quiet));
        if (s.act == A(FINISH)) {
            state = before;
            EXPECT_EQ(A(RESTART), uct_syncmem_rc_next(
                    &state, E(CONNECT_FAILED), &quiet));
            EXPECT_EQ(S(WAIT_REP), state);
            EXPECT_EQ(A(FINISH), uct_syncmem_rc_next(&state, E(REP), &quiet));
            break;
        }
    }
    EXPECT_EQ(S(IDLE), state);
}
