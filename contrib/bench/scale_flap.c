/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * scale_flap.c: scale -F SECONDS, a verified stream over all N endpoints at
 * once, for the fault bench's flap_0.5s_nN rows (contrib/harness/faults.sh),
 * which flaps the wire under it: every endpoint must get through, nothing
 * lost, duplicated or corrupted.
 *
 * Each endpoint i runs rounds, one at a time, all endpoints side by side: a
 * put_short of 8 bytes (i << 40 | round) into its own slot, a fetch-add of
 * 1 on its own counter, and a flush. No endpoint waits for another: one
 * that has no room (a reconnect under way) is passed over until it has.
 * A put counts as ok when its round's flush completed without error, a
 * fetch-add when its completion had no error; anything else is failed (of
 * unknown outcome), and an endpoint with a failed operation stops.
 * Checked:
 *  lost       a fetch-add that fetched fewer than the ok ones before it, a
 *             counter below its ok adds, a slot older than its last ok put;
 *  duplicated a fetch that skipped past the adds issued before it, a
 *             counter above the adds issued (an add applied twice);
 *  corrupted  a slot that holds no put of its endpoint.
 * Prints, as faults.c does (contrib/harness/faults.py reads these lines):
 * "stall START END [open]" for every gap of more than 100 ms in which no
 * round completed anywhere, "streamed START END", "epgap I [START END]..."
 * (endpoint i's gaps of more than 100 ms between two completed rounds,
 * the FLAP_GAPS longest: its recovery is read from the one the link's
 * return falls in), "event reconnect ..." (faults_events.h), and a
 * last "result ..." line. Times are realtime seconds.
 */
#include "scale_flap.h"
#include "../harness/faults_events.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FLAP_STALL_SEC 0.1
#define FLAP_GAPS      8

typedef struct flap_ep flap_ep_t;

typedef struct {
    uct_completion_t super;
    flap_ep_t        *ep;
} flap_comp_t;

/* One endpoint's rounds */
struct flap_ep {
    unsigned     i;
    uint8_t      stage;      /* 0: put to post, 1: add, 2: flush, 3: wait */
    uint8_t      dead;       /* an operation failed: no more rounds */
    unsigned     pending;    /* completions not in yet */
    ucs_status_t add_status, flush_status;
    uint64_t     round;      /* of the round in flight (from 1) */
    uint64_t     fetched;
    uint64_t     last_ok;    /* the value of the last put known done */
    uint64_t     adds_ok, adds_failed, puts_ok, puts_failed;
    double       last_done;
    double       gap[FLAP_GAPS][2]; /* (start, end), longest kept */
    flap_comp_t  add_comp, flush_comp;
};

typedef struct {
    scale_t   *s;
    flap_ep_t *eps;
    double    last_any;      /* realtime of the last completed round */
    unsigned  lost, duplicated, corrupted, busy;
} flap_t;

static double real_sec(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t *flap_slot(flap_t *f, unsigned i)
{
    return (uint64_t*)((char*)f->s->target + 4096) + 2 * i;
}

static void flap_comp_cb(uct_completion_t *self)
{
    flap_comp_t *c = ucs_container_of(self, flap_comp_t, super);

    if (c == &c->ep->add_comp) {
        c->ep->add_status = self->status;
    } else {
        c->ep->flush_status = self->status;
    }
    --c->ep->pending;
}

/* A gap in e's rounds: kept if among the FLAP_GAPS longest */
static void flap_gap(flap_ep_t *e, double start, double end)
{
    unsigned i, shortest = 0;

    for (i = 1; i < FLAP_GAPS; ++i) {
        if (e->gap[i][1] - e->gap[i][0] <
            e->gap[shortest][1] - e->gap[shortest][0]) {
            shortest = i;
        }
    }
    if (end - start > e->gap[shortest][1] - e->gap[shortest][0]) {
        e->gap[shortest][0] = start;
        e->gap[shortest][1] = end;
    }
}

/* The round of e is done: count it, check its fetch */
static void flap_round_done(flap_t *f, flap_ep_t *e)
{
    double now = real_sec();

    if (e->flush_status == UCS_OK) {
        ++e->puts_ok;
        e->last_ok = ((uint64_t)e->i << 40) | e->round;
    } else {
        ++e->puts_failed;
    }
    if (e->add_status == UCS_OK) {
        /* it fetched the adds applied before it: at least the ok ones, at
         * most all issued */
        if (e->fetched < e->adds_ok) {
            ++f->lost;
        } else if (e->fetched > e->adds_ok + e->adds_failed) {
            ++f->duplicated;
        }
        ++e->adds_ok;
    } else {
        ++e->adds_failed;
    }
    if ((e->add_status != UCS_OK) || (e->flush_status != UCS_OK)) {
        e->dead = 1;
    }
    if (now - e->last_done > FLAP_STALL_SEC) {
        flap_gap(e, e->last_done, now);
    }
    if (now - f->last_any > FLAP_STALL_SEC) {
        printf("stall %.6f %.6f\n", f->last_any, now);
    }
    e->last_done = f->last_any = now;
    e->stage     = 0;
    --f->busy;
}

/* Takes e's round one step further; a failure to post kills e */
static void flap_step(flap_t *f, flap_ep_t *e, int issue)
{
    scale_t *s          = f->s;
    uint64_t *slot      = flap_slot(f, e->i);
    ucs_status_t status = UCS_OK;
    uint64_t value;

    if ((e->stage == 0) && issue && !e->dead) {
        value  = ((uint64_t)e->i << 40) | (e->round + 1);
        status = uct_ep_put_short(s->eps[e->i], &value, sizeof(value),
                                  (uintptr_t)slot, s->rkey.rkey);
        if (status == UCS_OK) {
            ++e->round;
            ++f->busy;
            e->stage   = 1;
            e->pending = 2;
        }
    }
    if (e->stage == 1) {
        e->add_comp.super.count = 1;
        status = uct_ep_atomic64_fetch(s->eps[e->i], UCT_ATOMIC_OP_ADD, 1,
                                       &e->fetched, (uintptr_t)(slot + 1),
                                       s->rkey.rkey, &e->add_comp.super);
        if ((status != UCS_INPROGRESS) && (status != UCS_ERR_NO_RESOURCE)) {
            e->add_status = status; /* done at once, or refused */
            --e->pending;
        }
        e->stage += (status != UCS_ERR_NO_RESOURCE);
    }
    if (e->stage == 2) {
        e->flush_comp.super.count = 1;
        status = uct_ep_flush(s->eps[e->i], 0, &e->flush_comp.super);
        if ((status != UCS_INPROGRESS) && (status != UCS_ERR_NO_RESOURCE)) {
            e->flush_status = status;
            --e->pending;
        }
        e->stage += (status != UCS_ERR_NO_RESOURCE);
    }
    if ((e->stage == 3) && (e->pending == 0)) {
        flap_round_done(f, e);
    } else if ((e->stage == 0) && UCS_STATUS_IS_ERR(status) &&
               (status != UCS_ERR_NO_RESOURCE)) {
        e->dead = 1; /* the put itself was refused: it never ran */
    }
}

/* The memory against what each endpoint knows was done */
static void flap_check(flap_t *f)
{
    flap_ep_t *e;
    uint64_t *slot;
    unsigned i;

    for (i = 0; i < f->s->n; ++i) {
        e    = &f->eps[i];
        slot = flap_slot(f, i);
        if ((slot[0] != 0) && (((slot[0] >> 40) != i) ||
                               ((slot[0] & UCS_MASK(40)) > e->round))) {
            ++f->corrupted; /* no put of this endpoint */
        } else if (slot[0] < e->last_ok) {
            ++f->lost;
        }
        if (slot[1] < e->adds_ok) {
            ++f->lost;
        } else if (slot[1] > e->adds_ok + e->adds_failed) {
            ++f->duplicated;
        }
    }
}

/* From before the endpoints connect: their REQs sent again count too */
void scale_flap_watch(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* a child ends in _exit */
    faults_events_watch();
}

int scale_flap(scale_t *s)
{
    flap_t f = { .s = s };
    uint64_t puts_ok = 0, puts_failed = 0, adds_ok = 0, adds_failed = 0;
    unsigned i, k, dead = 0;
    double start, end, drain;
    int hang = 0, fd;

    f.eps = calloc(s->n, sizeof(*f.eps));
    if (f.eps == NULL) {
        return scale_fail(s, "no memory for the stream");
    }
    for (i = 0; i < s->n; ++i) {
        f.eps[i].i                     = i;
        f.eps[i].add_comp.super.func   = flap_comp_cb;
        f.eps[i].add_comp.ep           = &f.eps[i];
        f.eps[i].flush_comp.super.func = flap_comp_cb;
        f.eps[i].flush_comp.ep         = &f.eps[i];
    }

    start = f.last_any = real_sec();
    end   = start + s->opts->flap_sec;
    for (i = 0; i < s->n; ++i) {
        f.eps[i].last_done = start; /* a first round late is a gap too */
    }
    if ((s->opts->flag != NULL) &&
        ((fd = open(s->opts->flag, O_CREAT | O_WRONLY, 0644)) >= 0)) {
        close(fd);
    }
    while (real_sec() < end) {
        for (i = 0; i < s->n; ++i) {
            flap_step(&f, &f.eps[i], 1);
        }
        uct_worker_progress(s->worker[0]);
        uct_worker_progress(s->worker[1]);
    }

    /* the rounds in flight finish, within the bound */
    drain = now_sec();
    while (f.busy > 0) {
        for (i = 0; i < s->n; ++i) {
            flap_step(&f, &f.eps[i], 0);
        }
        uct_worker_progress(s->worker[0]);
        uct_worker_progress(s->worker[1]);
        if (now_sec() - drain > s->opts->wait_sec) {
            hang = 1;
            break;
        }
    }
    end = real_sec();
    if (end - f.last_any > FLAP_STALL_SEC) {
        printf("stall %.6f %.6f open\n", f.last_any, end);
    }
    printf("streamed %.6f %.6f\n", start, end);

    flap_check(&f);
    for (i = 0; i < s->n; ++i) {
        printf("epgap %u", i);
        for (k = 0; k < FLAP_GAPS; ++k) {
            if (f.eps[i].gap[k][1] > 0) {
                printf(" %.6f %.6f", f.eps[i].gap[k][0], f.eps[i].gap[k][1]);
            }
        }
        printf("\n");
        puts_ok     += f.eps[i].puts_ok;
        puts_failed += f.eps[i].puts_failed;
        adds_ok     += f.eps[i].adds_ok;
        adds_failed += f.eps[i].adds_failed;
        dead        += f.eps[i].dead;
    }
    printf("result ops_ok=%lu ops_failed=%lu lost=%u duplicated=%u"
           " corrupted=%u hang=%d ep_recreated=0 eps=%u eps_failed=%u"
           " put=%lu/%lu get=0/0 fadd=%lu/%lu am=0/0 am_died_with_peer=0"
           " connect_failed=0 what=%s pending=%u\n",
           puts_ok + adds_ok, puts_failed + adds_failed, f.lost,
           f.duplicated, f.corrupted, hang, s->n, dead, puts_ok, puts_failed,
           adds_ok, adds_failed, hang ? "drain" : "-", f.busy);
    fflush(stdout);
    free(f.eps);
    return hang ? scale_fail(s, "the stream's last rounds did not complete"
                             " within %.0f s", s->opts->wait_sec) : 0;
}
