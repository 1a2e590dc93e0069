/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An MPI program for Open MPI and MPICH over UCX with UCX_TLS=syncmem: point to
 * point of many sizes, nonblocking collectives, and one-sided put, get,
 * accumulate, fetch-and-op and compare-and-swap under contention from all
 * ranks. Every result is checked exactly; any mismatch aborts the job.
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

#define CHECK(_cond, ...) \
    do { \
        if (!(_cond)) { \
            fprintf(stderr, "rank %d: %s:%d: ", rank, __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__); \
            fprintf(stderr, "\n"); \
            MPI_Abort(MPI_COMM_WORLD, 1); \
        } \
    } while (0)

static unsigned char pattern(int src, size_t i)
{
    return (unsigned char)(src * 37 + i * 11 + (i >> 9));
}

static void test_p2p(void)
{
    static const size_t sizes[] = {0, 1, 7, 8, 100, 4095, 65536, 1 << 20,
                                   (1 << 22) + 3};
    int peer_to = (rank + 1) % size, peer_from = (rank + size - 1) % size;

    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); ++s) {
        size_t n = sizes[s];
        unsigned char *out = malloc(n + 1), *in = malloc(n + 1);
        MPI_Request req[2];

        for (size_t i = 0; i < n; ++i) {
            out[i] = pattern(rank, i);
        }
        memset(in, 0xee, n + 1);
        MPI_Irecv(in, (int)n, MPI_BYTE, peer_from, (int)s, MPI_COMM_WORLD,
                  &req[0]);
        MPI_Isend(out, (int)n, MPI_BYTE, peer_to, (int)s, MPI_COMM_WORLD,
                  &req[1]);
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
        for (size_t i = 0; i < n; ++i) {
            CHECK(in[i] == pattern(peer_from, i), "p2p size %zu byte %zu", n, i);
        }
        CHECK(in[n] == 0xee, "p2p size %zu: wrote past the end", n);
        free(out);
        free(in);
    }
}

static void test_collectives(void)
{
    enum { N = 10000 };
    long *in = malloc(N * sizeof(long)), *out = malloc(N * sizeof(long));
    MPI_Request req;

    for (int i = 0; i < N; ++i) {
        in[i] = (long)i * (rank + 1);
    }
    MPI_Iallreduce(in, out, N, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    for (int i = 0; i < N; ++i) {
        CHECK(out[i] == (long)i * size * (size + 1) / 2, "iallreduce [%d]", i);
    }

    for (int i = 0; i < N; ++i) {
        out[i] = (rank == size - 1) ? i * 3 : -1;
    }
    MPI_Ibcast(out, N, MPI_LONG, size - 1, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    for (int i = 0; i < N; ++i) {
        CHECK(out[i] == i * 3, "ibcast [%d]", i);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(in);
    free(out);
}

static void test_rma(void)
{
    enum { N = 4096, ROUNDS = 100 };
    int64_t *base;
    MPI_Win win;
    int target = (rank + 1) % size;

    MPI_Win_allocate(N * sizeof(int64_t) * 2, sizeof(int64_t), MPI_INFO_NULL,
                     MPI_COMM_WORLD, &base, &win);
    memset(base, 0, N * sizeof(int64_t) * 2);
    MPI_Barrier(MPI_COMM_WORLD);

    /* put, then get it back */
    int64_t *buf = malloc(N * sizeof(int64_t)), *back = malloc(N * sizeof(int64_t));
    for (int i = 0; i < N; ++i) {
        buf[i] = ((int64_t)rank << 32) | i;
    }
    MPI_Win_fence(0, win);
    MPI_Put(buf, N, MPI_INT64_T, target, 0, N, MPI_INT64_T, win);
    MPI_Win_fence(0, win);
    MPI_Get(back, N, MPI_INT64_T, target, 0, N, MPI_INT64_T, win);
    MPI_Win_fence(0, win);
    for (int i = 0; i < N; ++i) {
        CHECK(back[i] == buf[i], "put/get [%d]", i);
        CHECK(base[i] == ((((int64_t)(rank + size - 1) % size) << 32) | i),
              "put landed [%d]", i);
    }

    /* accumulate from every rank to rank 0, several ops and types */
    int64_t *acc = base + N;   /* [0] sum, [1] band, [2] bor, [3] bxor */
    int32_t one32 = 1;
    MPI_Win_fence(0, win);
    if (rank == 0) {
        acc[1] = -1;
    }
    /* the last fence must end the active-target epochs: passive-target
     * (lock_all) epochs may not overlap them (MPICH relies on it) */
    MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
    /* origin buffers stay untouched until the epoch ends (an MPI may read
     * them late, as MPICH does): one value per round, the rest constant */
    int64_t v[ROUNDS], mask = ~((int64_t)1 << (rank % 60));
    int64_t bit = (int64_t)1 << rank, x = (int64_t)0x5555 << rank;
    MPI_Win_lock_all(0, win);
    for (int r = 0; r < ROUNDS; ++r) {
        v[r] = r + 1;
        MPI_Accumulate(&v[r], 1, MPI_INT64_T, 0, N + 0, 1, MPI_INT64_T, MPI_SUM, win);
        MPI_Accumulate(&mask, 1, MPI_INT64_T, 0, N + 1, 1, MPI_INT64_T, MPI_BAND, win);
        MPI_Accumulate(&bit, 1, MPI_INT64_T, 0, N + 2, 1, MPI_INT64_T, MPI_BOR, win);
        MPI_Accumulate(&x, 1, MPI_INT64_T, 0, N + 3, 1, MPI_INT64_T, MPI_BXOR, win);
        /* the low half of slot N + 4 (little-endian), at its 8-byte disp */
        MPI_Accumulate(&one32, 1, MPI_INT32_T, 0, N + 4, 1, MPI_INT32_T,
                       MPI_SUM, win);
    }
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);

    /* fetch-and-op and compare-and-swap increments of one counter */
    int64_t one = 1, got, expect;
    MPI_Win_lock_all(0, win);
    for (int r = 0; r < ROUNDS; ++r) {
        MPI_Fetch_and_op(&one, &got, MPI_INT64_T, 0, N + 5, MPI_SUM, win);
        MPI_Win_flush(0, win);
        CHECK(got >= 0 && got < (int64_t)ROUNDS * size * 2, "fetch_and_op %ld",
              (long)got);
        for (expect = 0;;) {
            int64_t next = expect + 1;
            MPI_Compare_and_swap(&next, &expect, &got, MPI_INT64_T, 0, N + 5,
                                 win);
            MPI_Win_flush(0, win);
            if (got == expect) {
                break;
            }
            expect = got;
        }
    }
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);

    if (rank == 0) {
        int64_t bor = 0, bxor = 0, band = -1;
        for (int p = 0; p < size; ++p) {
            bor  |= (int64_t)1 << p;
            band &= ~((int64_t)1 << (p % 60));
            if (ROUNDS % 2) {
                bxor ^= (int64_t)0x5555 << p;
            }
        }
        CHECK(acc[0] == (int64_t)size * ROUNDS * (ROUNDS + 1) / 2,
              "accumulate sum %ld", (long)acc[0]);
        CHECK(acc[1] == band, "accumulate band %lx", (long)acc[1]);
        CHECK(acc[2] == bor, "accumulate bor %lx", (long)acc[2]);
        CHECK(acc[3] == bxor, "accumulate bxor %lx", (long)acc[3]);
        CHECK(((int32_t*)base)[2 * (N + 4)] == size * ROUNDS,
              "accumulate int32 sum %d", ((int32_t*)base)[2 * (N + 4)]);
        CHECK(acc[5] == (int64_t)2 * size * ROUNDS,
              "fetch_and_op + cswap count %ld", (long)acc[5]);
    }

    free(buf);
    free(back);
    MPI_Win_free(&win);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    test_p2p();
    test_collectives();
    test_rma();

    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        printf("mpi_syncmem: %d ranks, all checks passed\n", size);
    }
    MPI_Finalize();
    return 0;
}
