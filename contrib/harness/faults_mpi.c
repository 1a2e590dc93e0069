/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * faults_mpi: MPI one-sided operations under a fault (contrib/harness/faults.sh,
 * the mpi_* rows). Two ranks; rank 0 puts and fetch-adds into rank 1's
 * window for SECONDS, one passive-target epoch (lock_all), a flush after
 * each pair:
 *
 *   mpirun -np 2 ... faults_mpi SECONDS FLAGFILE
 *
 * Rank 0 creates FLAGFILE after its first completed flush (the script times
 * its fault from then) and prints "stall START END" for every gap of more
 * than 100 ms between flushes ("stall START END open" if the stream ended
 * in one) and "streamed START END" at the end of its stream. Every fetch-add must return exactly the
 * number of adds before it (one origin): less is an add lost, more one
 * applied twice. At the end rank 1 checks the counter and the last put in
 * every slot, and prints one "result ..." line. Both ranks print an
 * "event ..." line for each of syncmem's reconnects (faults_events.h).
 *
 * The window returns its errors (MPI_ERRORS_RETURN): a fetch-add that was
 * in flight when the link broke may or may not have run, and syncmem's
 * reconnect reports it as failed rather than run it twice. Such a pair
 * counts as failed (2 ops), its add as unknown: the next fetch-add tells
 * whether it ran. The result line says which call returned each failed
 * pair's error (pairs_failed_at=PUT/FETCH_AND_OP/FLUSH): the fault bench
 * forgives a failed fetch-add after a reconnect onto a new QP, and nothing
 * else. Two failed pairs in a row mean the connection itself is
 * gone: the job aborts (MPI_Abort), a clean failure. Errors elsewhere
 * (the communicator's) stay fatal.
 */
#include "faults_events.h"

#include <mpi.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#define NSLOTS     16
#define SLOT_WORDS 256     /* 2 KiB: two or more packets */

static uint64_t pattern(uint64_t id, unsigned j)
{
    return (j == 0) ? id : (id * 0x9e3779b97f4a7c15ull) ^ j;
}

static double now(void)
{
    struct timeval tv;

    gettimeofday(&tv, NULL);
    return tv.tv_sec + tv.tv_usec * 1e-6;
}

int main(int argc, char **argv)
{
    uint64_t put[SLOT_WORDS], one = 1, old, n = 0, lost = 0, dup = 0;
    uint64_t corrupt = 0, ok = 0, failed = 0, unknown = 0, *base;
    uint64_t failed_at[3] = {0}; /* put, fetch-add, flush */
    double secs, end, t, last, start = 0;
    unsigned j, s;
    int rank, size, streaming = 0, err, errors = 0, at;
    MPI_Win win;
    FILE *f;

    MPI_Init(&argc, &argv);
    faults_events_watch();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if ((size != 2) || (argc != 3)) {
        if (rank == 0) {
            fprintf(stderr, "usage: mpirun -np 2 faults_mpi SECONDS FLAGFILE\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    secs = atof(argv[1]);
    /* counter in word 0, then the slots */
    MPI_Win_allocate((1 + NSLOTS * SLOT_WORDS) * 8, 8, MPI_INFO_NULL,
                     MPI_COMM_WORLD, &base, &win);
    memset(base, 0, (1 + NSLOTS * SLOT_WORDS) * 8);
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    MPI_Barrier(MPI_COMM_WORLD);

    MPI_Win_lock_all(0, win);
    if (rank == 0) {
        end  = now() + 120 + secs;
        last = now();
        while (now() < end) {
            for (j = 0; j < SLOT_WORDS; ++j) {
                put[j] = pattern(n + 1, j);
            }
            at  = 0;
            err = MPI_Put(put, SLOT_WORDS, MPI_UINT64_T, 1,
                          1 + (n % NSLOTS) * SLOT_WORDS, SLOT_WORDS,
                          MPI_UINT64_T, win);
            if (err == MPI_SUCCESS) {
                at  = 1;
                err = MPI_Fetch_and_op(&one, &old, MPI_UINT64_T, 1, 0,
                                       MPI_SUM, win);
            }
            if (err == MPI_SUCCESS) {
                at  = 2;
                err = MPI_Win_flush(1, win);
            }
            if (err != MPI_SUCCESS) {
                ++failed_at[at];
                printf("pair %" PRIu64 " failed (error %d): its add may or"
                       " may not have run\n", ok + failed / 2, err);
                fflush(stdout);
                if (++errors > 1) {
                    MPI_Abort(MPI_COMM_WORLD, 3);
                }
                failed += 2;
                ++unknown;
                /* the put's slot now holds this put or an older one */
                MPI_Win_flush(1, win);
                continue;
            }
            errors = 0;
            /* the adds of unknown outcome before this one: 0..unknown ran */
            if ((old < n) || (old > n + unknown)) {
                printf("fetch-add %" PRIu64 " returned %" PRIu64 " (%" PRIu64
                       " adds of unknown outcome before it)\n", n, old,
                       unknown);
                lost += (old < n) ? n - old : 0;
                dup  += (old > n + unknown) ? old - n - unknown : 0;
            }
            n       = old + 1;
            unknown = 0;
            ++ok;
            t = now();
            if (t - last > 0.1) {
                printf("stall %.3f %.3f\n", last, t);
            }
            last = t;
            if (!streaming) {
                end       = t + secs;
                start     = t;
                streaming = 1;
                if ((f = fopen(argv[2], "w")) != NULL) {
                    fclose(f);
                }
            }
        }
    }
    if (streaming) {
        t = now();
        if (t - last > 0.1) {
            printf("stall %.3f %.3f open\n", last, t);
        }
        printf("streamed %.3f %.3f\n", start, t);
        fflush(stdout);
    }
    if (unknown > 0) {
        /* the stream ended on a failed pair: read what its add did */
        if ((MPI_Fetch_and_op(&one, &old, MPI_UINT64_T, 1, 0, MPI_NO_OP,
                              win) != MPI_SUCCESS) ||
            (MPI_Win_flush(1, win) != MPI_SUCCESS)) {
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        n = ((old >= n) && (old <= n + unknown)) ? old : n;
    }
    MPI_Win_unlock_all(win);
    MPI_Bcast(&n, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    MPI_Bcast(&lost, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    MPI_Bcast(&dup, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    MPI_Bcast(&ok, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    MPI_Bcast(&failed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    MPI_Bcast(failed_at, 3, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);

    if (rank == 1) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win);
        if (base[0] != n) {
            printf("counter %" PRIu64 ", %" PRIu64 " fetch-adds\n", base[0], n);
            lost += (base[0] < n) ? n - base[0] : 0;
            dup  += (base[0] > n) ? base[0] - n : 0;
        }
        /* the last put into each slot: put number k went to slot (k-1) % N */
        for (s = 0; (s < NSLOTS) && (s < n); ++s) {
            uint64_t id = n - ((n - 1 - s) % NSLOTS);
            uint64_t *p = base + 1 + ((id - 1) % NSLOTS) * SLOT_WORDS;

            for (j = 0; j < SLOT_WORDS; ++j) {
                if (p[j] != pattern(id, j)) {
                    printf("slot %" PRIu64 ": put %" PRIu64 " is not there\n",
                           (id - 1) % NSLOTS, id);
                    ++corrupt;
                    break;
                }
            }
        }
        MPI_Win_unlock(1, win);
        printf("result ops_ok=%" PRIu64 " ops_failed=%" PRIu64 " lost=%"
               PRIu64 " duplicated=%" PRIu64 " corrupted=%" PRIu64
               " pairs_failed_at=%" PRIu64 "/%" PRIu64 "/%" PRIu64 "\n",
               2 * ok, failed, lost, dup, corrupt, failed_at[0], failed_at[1],
               failed_at[2]);
        fflush(stdout);
    }
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
