/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * passive_shmem: the passive-target bench (contrib/bench/passive.c) in
 * OpenSHMEM (contrib/bench.sh, section 'passive'). PE 0, the origin, does
 * shmem_long_atomic_fetch_add, _compare_swap and _swap on a symmetric
 * 64-bit word of PE 1, one at a time, while PE 1 computes in slices of 0
 * (it waits inside OpenSHMEM all the time), 1 and 10 ms, entering
 * OpenSHMEM only between slices:
 *
 *   oshrun -np 2 ... passive_shmem [PHASE_MS]
 *   oshrun -np 2 ... passive_shmem gups [PHASE_MS]
 *
 * Between slices PE 1 fetches a word of its own (shmem_long_atomic_fetch
 * on itself): a blocking call that runs UCX's progress. Open MPI 4.1's
 * shmem_test and shmem_quiet with nothing outstanding return without
 * progressing, so they would not serve.
 *
 * Prints the same lines as contrib/bench/passive: per op and slice the median
 * and p99 latency and the target's slowdown (its wall time for the slices
 * with the origin's traffic over that without), and "result wrong=N"
 * (fetched values checked against a mirror of the word, one origin).
 *
 * 'gups' is the random-update bench (contrib/bench/gups.h) instead: PE 0
 * XORs random words of a symmetric table of PE 1's, shmem_uint64_atomic_xor
 * GUPS_WINDOW at a time then shmem_quiet, and shmem_uint64_atomic_fetch_xor
 * one at a time (Open MPI 4.1's OSHMEM has no non-blocking fetching
 * atomics), while PE 1 waits inside OpenSHMEM (idle) or computes in
 * GUPS_BUSY_US slices (busy; its slowdown against a baseline phase without
 * traffic); PE 0 reads the table back at the end.
 */
#include <shmem.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "passive.h"
#include "gups.h"

/* symmetric: the target word, one the target fetches itself, and the
 * target's report of each phase (times, then the phase number) */
static long word, probe;
static double times[2];
static volatile long done_phase;
static uint64_t table[GUPS_WORDS];

static void enter_shmem(void)
{
    (void)shmem_long_atomic_fetch(&probe, 1);
}

/* PE 1: one phase of slices, then its times and the phase number into
 * PE 0 (puts, ordered by the fence: the origin polls the number). */
static void target_phase(long phase, unsigned slice_us, unsigned slices,
                         double per_us)
{
    double t[2];

    target_slices(slice_us, slices, per_us, enter_shmem, t);
    shmem_double_put(times, t, 2, 0);
    shmem_fence();
    shmem_long_p((long*)&done_phase, phase, 0);
    shmem_quiet();
}

static void one_op(int op)
{
    long result;

    switch (op) {
    case OP_FADD:
        result = shmem_long_atomic_fetch_add(&word, 1, 1);
        break;
    case OP_CSWAP:
        result = shmem_long_atomic_compare_swap(&word, (long)mirror,
                                                (long)mirror + 1, 1);
        break;
    default:
        result = shmem_long_atomic_swap(&word, (long)mirror + 1, 1);
        break;
    }
    check_fetched("passive_shmem", op, (uint64_t)result);
}

/* PE 0: one phase; op OP_NONE is the baseline (no traffic: it waits in
 * shmem_long_wait_until, whose progress the target's puts do not need). */
static unsigned origin_phase(long phase, int op, double *lat)
{
    unsigned n = 0;
    double s;

    if (op == OP_NONE) {
        shmem_long_wait_until((long*)&done_phase, SHMEM_CMP_GE, phase);
    }
    while (done_phase < phase) {
        s = now();
        one_op(op);
        if (n < MAX_OPS) {
            lat[n++] = (now() - s) * 1e6;
        }
    }
    return n;
}

/* PE 0: one batch of n XORs on PE 1's table, waited for (shmem_quiet,
 * or each fetch's reply) */
static void gups_batch(gups_t *g, int op, unsigned n)
{
    uint64_t val[GUPS_WINDOW], result[GUPS_WINDOW];
    unsigned idx[GUPS_WINDOW], i;

    gups_plan(g, n, idx, val);
    for (i = 0; i < n; ++i) {
        if (op == GUPS_FETCH) {
            result[i] = shmem_uint64_atomic_fetch_xor(&table[idx[i]], val[i], 1);
        } else {
            shmem_uint64_atomic_xor(&table[idx[i]], val[i], 1);
        }
    }
    if (op == GUPS_POST) {
        shmem_quiet();
    }
    gups_done(g, "passive_shmem gups", n, idx, val,
              (op == GUPS_FETCH) ? result : NULL);
}

/* The phases of the random-update bench (after the warm-up); PE 0's exit
 * status. */
static int gups_main(int me, unsigned phase_ms, double per_us)
{
    static const unsigned slices_us[] = { 0, GUPS_BUSY_US };
    static uint64_t back[GUPS_WORDS];
    static gups_t g;
    unsigned long n;
    unsigned s, slices, window;
    long phase = 0;
    double t, base = 0;
    int op;

    gups_init(&g);
    for (s = 0; s < sizeof(slices_us) / sizeof(slices_us[0]); ++s) {
        slices = slices_us[s] ? (phase_ms * 1000 / slices_us[s]) : phase_ms;
        /* (a busy target's first phase is its baseline: no traffic) */
        for (op = slices_us[s] ? -1 : 0; op < GUPS_OPS; ++op) {
            window = (op == GUPS_FETCH) ? 1 : GUPS_WINDOW;
            ++phase;
            shmem_barrier_all();
            if (me == 1) {
                target_phase(phase, slices_us[s], slices, per_us);
                continue;
            }
            if (op < 0) {
                origin_phase(phase, OP_NONE, NULL);
                base = times[0];
                continue;
            }
            t = now();
            for (n = 0; done_phase < phase; n += window) {
                gups_batch(&g, op, window);
            }
            gups_print(op, slices_us[s], window, n, now() - t,
                       slices_us[s] ? times[0] / base : 0);
        }
    }
    shmem_barrier_all();
    if (me == 0) {
        shmem_getmem(back, table, sizeof(back), 1);
        gups_check_table(&g, "passive_shmem gups", back);
        printf("result wrong=%lu\n", g.wrong);
    }
    return (me == 0 && g.wrong) ? 1 : 0;
}

int main(int argc, char **argv)
{
    static const unsigned slices_us[] = { 0, 1000, 10000 };
    unsigned phase_ms, s, slices, n, i;
    double per_us = 0, base[2] = { 1, 1 }, *lat = NULL;
    long phase = 0;
    int me, op, is_gups, rc;

    shmem_init();
    me = shmem_my_pe();
    if (shmem_n_pes() != 2) {
        if (me == 0) {
            fprintf(stderr, "usage: oshrun -np 2 passive_shmem [gups] [PHASE_MS]\n");
        }
        shmem_global_exit(2);
    }
    is_gups  = (argc > 1) && !strcmp(argv[1], "gups");
    phase_ms = (argc > 1 + is_gups) ? atoi(argv[1 + is_gups]) : 600;
    if (me == 1) {
        per_us = calibrate();   /* before any traffic */
        for (i = 0; i < GUPS_WORDS; ++i) {
            table[i] = gups_initial(i);
        }
    } else if ((lat = malloc(MAX_OPS * sizeof(*lat))) == NULL) {
        shmem_global_exit(2);
    }
    shmem_barrier_all();
    if (me == 0) {
        for (i = 0; i < 20; ++i) {      /* warm-up: connections, keys */
            one_op(i % OP_NONE);
        }
    }
    shmem_barrier_all();
    if (is_gups) {
        rc = gups_main(me, phase_ms, per_us);
        free(lat);
        shmem_finalize();
        return rc;
    }

    for (s = 0; s < sizeof(slices_us) / sizeof(slices_us[0]); ++s) {
        slices = slices_us[s] ? (phase_ms * 1000 / slices_us[s]) : phase_ms;
        for (op = (slices_us[s] ? OP_NONE : 0); ; op = (op + 1) % (OP_NONE + 1)) {
            ++phase;
            shmem_barrier_all();
            if (me == 1) {
                target_phase(phase, slices_us[s], slices, per_us);
            } else {
                n = origin_phase(phase, op, lat);
                if (op == OP_NONE) {
                    base[0] = times[0];
                    base[1] = times[1];
                } else {
                    qsort(lat, n, sizeof(*lat), cmp_double);
                    printf("phase op=%s slice_ms=%u ops=%u median_us=%.1f p99_us=%.1f",
                           op_names[op], slices_us[s] / 1000, n,
                           (n % 2) ? lat[n / 2] : (lat[n / 2 - 1] + lat[n / 2]) / 2,
                           lat[(n * 99) / 100]);
                    if (slices_us[s] != 0) {
                        printf(" slowdown=%.3f compute=%.3f", times[0] / base[0],
                               times[1] / base[1]);
                    }
                    printf("\n");
                    fflush(stdout);
                }
            }
            if (op == OP_SWAP) {
                break;
            }
        }
    }

    shmem_barrier_all();
    if (me == 0) {
        printf("result wrong=%lu\n", wrong);
    }
    free(lat);
    shmem_finalize();
    return (me == 0 && wrong) ? 1 : 0;
}
