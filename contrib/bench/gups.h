/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gups.h: the random-update bench's shared parts (GUPS-shaped: 64-bit XOR
 * to random words of a remote table), run by contrib/bench/passive.c in
 * UCP ('passive gups') and passive_shmem.c in OpenSHMEM ('passive_shmem
 * gups'): the table, its random stream, the origin's mirror of it and the
 * checks, and the line each phase prints:
 *
 *   gups op=xor_post target=busy window=1024 updates=N sec=S rate=R slowdown=X
 *
 * op: xor_post (non-fetching) or xor_fetch; target: idle (it waits inside
 * the library all the time) or busy (it computes in slices of
 * GUPS_BUSY_US and enters the library only between them, until it finds
 * nothing to do); window: the updates in flight at once (a batch of them,
 * then a flush or a wait for all); rate: updates per second over the
 * phase; slowdown (busy only): the target's time for its slices with the
 * updates over that without (a baseline phase), what serving them took
 * from it.
 *
 * The table starts with a non-zero value in every word (gups_initial), as
 * gups's does (its word i holds i): an emulation that guesses 0 is not
 * helped by a zeroed table.
 */
#ifndef SYNCMEM_CONTRIB_GUPS_H
#define SYNCMEM_CONTRIB_GUPS_H

#include <stdint.h>
#include <stdio.h>

#define GUPS_WORDS   1024   /* 8 KiB: Sandia OpenSHMEM gups's table a PE */
#define GUPS_WINDOW  1024   /* updates in flight: gups's look-ahead bound */
#define GUPS_BUSY_US 10000  /* the busy target's slice of compute */

enum { GUPS_POST, GUPS_FETCH, GUPS_OPS };

static const char *gups_op_names[] = { "xor_post", "xor_fetch" };

/* What word i of the table holds before any update. */
static inline uint64_t gups_initial(unsigned i)
{
    return (i + 1) * 0x9e3779b97f4a7c15ull;
}

/* The origin's side: its copy of the table (one origin updates it), the
 * random stream, and the batch each word was last planned in (a fetched
 * value is checked only for a word planned once in its batch: updates to
 * one word in flight together may run in any order). */
typedef struct {
    uint64_t      mirror[GUPS_WORDS];
    uint32_t      batch_of[GUPS_WORDS];
    uint8_t       twice[GUPS_WORDS];
    uint32_t      batch;
    uint64_t      ran;
    unsigned long wrong;
} gups_t;

static inline void gups_init(gups_t *g)
{
    unsigned i;

    for (i = 0; i < GUPS_WORDS; ++i) {
        g->mirror[i]   = gups_initial(i);
        g->batch_of[i] = 0;
    }
    g->batch = 0;
    g->ran   = 0x2545f4914f6cdd1dull;
    g->wrong = 0;
}

/* The next batch of n updates: word index and operand of each. The mirror
 * is not moved yet (gups_done does, once the fetched values are checked). */
static inline void gups_plan(gups_t *g, unsigned n, unsigned *idx,
                             uint64_t *val)
{
    unsigned i;

    ++g->batch;
    for (i = 0; i < n; ++i) {
        /* xorshift64 */
        g->ran ^= g->ran << 13;
        g->ran ^= g->ran >> 7;
        g->ran ^= g->ran << 17;
        idx[i] = (unsigned)(g->ran >> 40) % GUPS_WORDS;
        val[i] = g->ran;
        g->twice[idx[i]]    = (g->batch_of[idx[i]] == g->batch);
        g->batch_of[idx[i]] = g->batch;
    }
}

/* The batch ran: checks each fetched value (result NULL: none fetched)
 * of a word planned once in it, then moves the mirror. */
static inline void gups_done(gups_t *g, const char *prog, unsigned n,
                             const unsigned *idx, const uint64_t *val,
                             const uint64_t *result)
{
    unsigned i;

    for (i = 0; i < n; ++i) {
        if ((result != NULL) && !g->twice[idx[i]] &&
            (result[i] != g->mirror[idx[i]]) && (g->wrong++ < 5)) {
            fprintf(stderr, "%s: xor_fetch of word %u fetched 0x%llx, "
                    "expected 0x%llx\n", prog, idx[i],
                    (unsigned long long)result[i],
                    (unsigned long long)g->mirror[idx[i]]);
        }
    }
    for (i = 0; i < n; ++i) {
        g->mirror[idx[i]] ^= val[i];
    }
}

/* The table as read back at the end, against the mirror. */
static inline void gups_check_table(gups_t *g, const char *prog,
                                    const uint64_t *table)
{
    unsigned i;

    for (i = 0; i < GUPS_WORDS; ++i) {
        if ((table[i] != g->mirror[i]) && (g->wrong++ < 5)) {
            fprintf(stderr, "%s: table word %u is 0x%llx, expected 0x%llx\n",
                    prog, i, (unsigned long long)table[i],
                    (unsigned long long)g->mirror[i]);
        }
    }
}

/* A phase's line; slowdown 0: none (an idle target). */
static inline void gups_print(int op, unsigned slice_us, unsigned window,
                              unsigned long updates, double sec,
                              double slowdown)
{
    printf("gups op=%s target=%s window=%u updates=%lu sec=%.3f rate=%.0f",
           gups_op_names[op], slice_us ? "busy" : "idle", window, updates,
           sec, updates / sec);
    if (slowdown > 0) {
        printf(" slowdown=%.3f", slowdown);
    }
    printf("\n");
    fflush(stdout);
}

#endif
