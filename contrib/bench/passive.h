/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * passive.h: what the three passive-target benches share (contrib/bench/passive.c
 * in UCP, passive_mpi.c, passive_shmem.c): the operations, the target's
 * fixed work and its calibration, and the clock.
 */
#ifndef SYNCMEM_CONTRIB_PASSIVE_H
#define SYNCMEM_CONTRIB_PASSIVE_H

#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define MAX_OPS   100000  /* latencies kept per phase */
#define CALIB_SEC 0.05    /* how long calibrate() times compute() */

/* OP_NONE: a phase without traffic, the baseline of the slowdown */
enum { OP_FADD, OP_CSWAP, OP_SWAP, OP_NONE };

static const char *op_names[] = { "fadd", "cswap", "swap" };
static volatile unsigned long sink;

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Work the compiler cannot drop: a dependent chain. */
static void compute(unsigned long iters)
{
    unsigned long x = sink, i;

    for (i = 0; i < iters; ++i) {
        x = x * 6364136223846793005ul + 1442695040888963407ul;
    }
    sink = x;
}

/* Iterations of compute() per microsecond on this (idle) CPU. */
static double calibrate(void)
{
    unsigned long iters = 1000;
    double t;

    for (;;) {
        t = now();
        compute(iters);
        t = now() - t;
        if (t >= CALIB_SEC) {
            return iters / (t * 1e6);
        }
        iters *= 2;
    }
}

/* The target's phase: slices of slice_us of compute(), each followed by
 * enter() (into the library); slice_us 0 is enter() all the time, for
 * slices ms. t[0]: the wall time, t[1]: the time in compute(). */
static void target_slices(unsigned slice_us, unsigned slices, double per_us,
                          void (*enter)(void), double t[2])
{
    unsigned long iters = (unsigned long)(per_us * slice_us);
    double start = now(), c;
    unsigned i;

    t[1] = 0;
    if (slice_us == 0) {
        while (now() - start < slices * 1e-3) {
            enter();
        }
    } else {
        for (i = 0; i < slices; ++i) {
            c = now();
            compute(iters);
            t[1] += now() - c;
            enter();
        }
    }
    t[0] = now() - start;
}

/* The origin's copy of the target word (one origin): each fetched value
 * must equal it; then it moves on by one, as the operation moved the word.
 * A wrong value is counted, the first few said. */
static uint64_t mirror;
static unsigned long wrong;

static void check_fetched(const char *prog, int op, uint64_t result)
{
    if (result != mirror) {
        if (wrong++ < 5) {
            fprintf(stderr, "%s: %s fetched %llu, expected %llu\n", prog,
                    op_names[op], (unsigned long long)result,
                    (unsigned long long)mirror);
        }
        mirror = result;
    }
    ++mirror;
}

/* qsort of latencies, for the median and p99 */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double*)a, y = *(const double*)b;

    return (x > y) - (x < y);
}

#endif
