/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * passive_mpi: the passive-target bench (contrib/bench/passive.c) in one-sided
 * MPI (contrib/bench.sh, section 'passive'). Rank 0, the origin, does
 * MPI_Fetch_and_op (MPI_SUM: fetch-add; MPI_REPLACE: swap) and
 * MPI_Compare_and_swap on a 64-bit word in rank 1's window, one at a time
 * in a passive-target epoch (MPI_Win_lock, MPI_Win_flush after each op),
 * while rank 1 computes in slices of 0 (it waits inside MPI all the time),
 * 1 and 10 ms, entering MPI only between slices (MPI_Test, which runs
 * Open MPI's progress, the osc component's with it):
 *
 *   mpirun -np 2 ... passive_mpi [PHASE_MS]
 *
 * Prints the same lines as contrib/bench/passive: per op and slice the median
 * and p99 latency and the target's slowdown (its wall time for the slices
 * with the origin's traffic over that without), and "result wrong=N"
 * (fetched values checked against a mirror of the word, one origin).
 * With PASSIVE_DEBUG set, the target reports each phase's end and both
 * ranks the final barrier on stderr (for finding where a run hangs).
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "passive.h"

#define TAG_DONE  7
#define TAG_END   8

/* Rank 1's way into MPI between slices: MPI_Test on a receive that stays
 * pending until the end, which runs Open MPI's progress (the osc
 * component's with it) each time. (MPI_Iprobe would not do: pml ucx runs
 * the whole progress only once in 100 calls.) */
static MPI_Request pending;
static unsigned end_msg;

static void enter_mpi(void)
{
    int flag;

    MPI_Test(&pending, &flag, MPI_STATUS_IGNORE);
}

/* Rank 1: one phase of slices; sends its wall and compute time to rank 0. */
static void target_phase(unsigned slice_us, unsigned slices, double per_us)
{
    double t[2];

    target_slices(slice_us, slices, per_us, enter_mpi, t);
    if (getenv("PASSIVE_DEBUG") != NULL) {
        fprintf(stderr, "target: %u x %u us done\n", slices, slice_us);
    }
    MPI_Send(t, 2, MPI_DOUBLE, 0, TAG_DONE, MPI_COMM_WORLD);
}

static void one_op(int op, MPI_Win win)
{
    uint64_t value = (op == OP_FADD) ? 1 : mirror + 1, result = ~0ull;

    switch (op) {
    case OP_FADD:
        MPI_Fetch_and_op(&value, &result, MPI_UINT64_T, 1, 0, MPI_SUM, win);
        break;
    case OP_CSWAP:
        MPI_Compare_and_swap(&value, &mirror, &result, MPI_UINT64_T, 1, 0, win);
        break;
    default:
        MPI_Fetch_and_op(&value, &result, MPI_UINT64_T, 1, 0, MPI_REPLACE, win);
        break;
    }
    MPI_Win_flush(1, win);
    check_fetched("passive_mpi", op, result);
}

/* Rank 0: one phase; op OP_NONE is the baseline (no traffic). */
static void origin_phase(int op, MPI_Win win, double *lat, unsigned *n_p,
                         double t[2])
{
    MPI_Request req;
    unsigned n = 0;
    int done = 0;
    double s;

    MPI_Irecv(t, 2, MPI_DOUBLE, 1, TAG_DONE, MPI_COMM_WORLD, &req);
    if (op == OP_NONE) {
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    while (!done && (op != OP_NONE)) {
        s = now();
        one_op(op, win);
        if (n < MAX_OPS) {
            lat[n++] = (now() - s) * 1e6;
        }
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    }
    *n_p = n;
}

int main(int argc, char **argv)
{
    static const unsigned slices_us[] = { 0, 1000, 10000 };
    unsigned phase_ms, s, slices, n, i;
    double per_us = 0, base[2] = { 1, 1 }, t[2], *lat = NULL;
    uint64_t *word;
    int rank, size, op;
    MPI_Win win;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0) {
            fprintf(stderr, "usage: mpirun -np 2 passive_mpi [PHASE_MS]\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    phase_ms = (argc > 1) ? atoi(argv[1]) : 600;
    MPI_Win_allocate(sizeof(*word), sizeof(*word), MPI_INFO_NULL,
                     MPI_COMM_WORLD, &word, &win);
    *word = 0;
    if (rank == 1) {
        per_us = calibrate();   /* before any traffic */
        MPI_Irecv(&end_msg, 1, MPI_UNSIGNED, 0, TAG_END, MPI_COMM_WORLD, &pending);
    } else if ((lat = malloc(MAX_OPS * sizeof(*lat))) == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    if (rank == 0) {
        MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
        for (i = 0; i < 20; ++i) {      /* warm-up: connections, keys */
            one_op(i % OP_NONE, win);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);

    for (s = 0; s < sizeof(slices_us) / sizeof(slices_us[0]); ++s) {
        slices = slices_us[s] ? (phase_ms * 1000 / slices_us[s]) : phase_ms;
        for (op = (slices_us[s] ? OP_NONE : 0); ; op = (op + 1) % (OP_NONE + 1)) {
            if (rank == 1) {
                target_phase(slices_us[s], slices, per_us);
            } else {
                origin_phase(op, win, lat, &n, (op == OP_NONE) ? base : t);
                if (op != OP_NONE) {
                    qsort(lat, n, sizeof(*lat), cmp_double);
                    printf("phase op=%s slice_ms=%u ops=%u median_us=%.1f p99_us=%.1f",
                           op_names[op], slices_us[s] / 1000, n,
                           (n % 2) ? lat[n / 2] : (lat[n / 2 - 1] + lat[n / 2]) / 2,
                           lat[(n * 99) / 100]);
                    if (slices_us[s] != 0) {
                        printf(" slowdown=%.3f compute=%.3f", t[0] / base[0],
                               t[1] / base[1]);
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

    if (rank == 0) {
        MPI_Win_unlock(1, win);
        MPI_Send(&s, 1, MPI_UNSIGNED, 1, TAG_END, MPI_COMM_WORLD);
    } else {
        MPI_Wait(&pending, MPI_STATUS_IGNORE);
    }
    MPI_Win_free(&win);
    if (rank == 0) {
        printf("result wrong=%lu\n", wrong);
    }
    free(lat);
    MPI_Finalize();
    return (rank == 0 && wrong) ? 1 : 0;
}
