/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * OpenSHMEM over syncmem (Open MPI's OSHMEM, spml ucx, UCX_TLS=syncmem):
 * puts, gets, the 64- and 32-bit atomics including the bitwise ones, and
 * barriers, among every PE. Each check is verified on the target; any
 * failure makes the run fail. Run by test/mpi/shmem_run.sh.
 *
 * Not checked: 32-bit compare-and-swap, which is broken in Debian 12's
 * OSHMEM itself.
 */
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>

#define ITERS 200

static int failures;

#define CHECK(cond, ...) \
    do { \
        if (!(cond)) { \
            fprintf(stderr, "shmem_syncmem: PE %d: ", shmem_my_pe()); \
            fprintf(stderr, __VA_ARGS__); \
            fputc('\n', stderr); \
            ++failures; \
        } \
    } while (0)

int main(void)
{
    static long slots[64], lock = -1, swapped = -1, winners, counter;
    static unsigned long bits_or, bits_xor, bits_and = ~0ul;
    static int counter32;
    static unsigned int bits32_or, bits32_xor, bits32_and = ~0u;
    long *remote, old, total;
    int me, npes, pe, i, rounds;

    shmem_init();
    me   = shmem_my_pe();
    npes = shmem_n_pes();
    if (npes > 64) {
        fprintf(stderr, "shmem_syncmem: at most 64 PEs\n");
        shmem_global_exit(2);
    }

    /* put: my number into my slot of every PE; get: back from each */
    for (pe = 0; pe < npes; ++pe) {
        shmem_long_p(&slots[me], 1000 + me, pe);
    }
    shmem_barrier_all();
    for (pe = 0; pe < npes; ++pe) {
        CHECK(slots[pe] == 1000 + pe, "put: slot %d holds %ld", pe, slots[pe]);
        CHECK(shmem_long_g(&slots[me], pe) == 1000 + me,
              "get: PE %d's slot %d", pe, me);
    }

    /* a block put and get through the symmetric heap */
    remote = shmem_malloc(ITERS * sizeof(long));
    for (i = 0; i < ITERS; ++i) {
        remote[i] = -1;
    }
    shmem_barrier_all();
    {
        long src[ITERS], dst[ITERS];
        int right = (me + 1) % npes;

        for (i = 0; i < ITERS; ++i) {
            src[i] = me * 100000L + i;
        }
        shmem_long_put(remote, src, ITERS, right);
        shmem_quiet();
        shmem_barrier_all();
        shmem_long_get(dst, remote, ITERS, right);
        for (i = 0; i < ITERS; ++i) {
            CHECK(remote[i] == ((me + npes - 1) % npes) * 100000L + i,
                  "block put: word %d holds %ld", i, remote[i]);
            CHECK(dst[i] == me * 100000L + i, "block get: word %d", i);
        }
    }

    /* 64-bit atomics, all on PE 0 */
    shmem_barrier_all();
    for (i = 0; i < ITERS; ++i) {
        shmem_long_atomic_add(&counter, 1, 0);
        old = shmem_long_atomic_fetch_add(&counter, 2, 0);
        CHECK(old >= 0 && old < 3L * ITERS * npes, "fetch_add returned %ld", old);
    }
    old = shmem_long_atomic_compare_swap(&lock, -1, me, 0);
    if (old == -1) {
        shmem_long_atomic_inc(&winners, 0);
    }
    old = shmem_long_atomic_swap(&swapped, me, 0);
    CHECK(old >= -1 && old < npes, "swap returned %ld", old);
    shmem_ulong_atomic_fetch_or(&bits_or, 1ul << me, 0);
    shmem_ulong_atomic_fetch_xor(&bits_xor, 3ul << (2 * (me % 32)), 0);
    shmem_ulong_atomic_fetch_and(&bits_and, ~(1ul << me), 0);

    /* 32-bit atomics (but cswap: see the top) */
    for (i = 0; i < ITERS; ++i) {
        shmem_int_atomic_fetch_add(&counter32, 1, 0);
    }
    shmem_uint_atomic_fetch_or(&bits32_or, 1u << (me % 32), 0);
    shmem_uint_atomic_fetch_xor(&bits32_xor, 1u << (me % 32), 0);
    shmem_uint_atomic_fetch_and(&bits32_and, ~(1u << (me % 32)), 0);
    shmem_barrier_all();

    if (me == 0) {
        unsigned long all = (npes == 64) ? ~0ul : ((1ul << npes) - 1);
        unsigned long xor_all = 0;

        for (pe = 0; pe < npes; ++pe) {
            xor_all ^= 3ul << (2 * (pe % 32));
        }
        total = 3L * ITERS * npes;
        CHECK(counter == total, "counter %ld, expected %ld", counter, total);
        CHECK(winners == 1, "%ld PEs won the compare-and-swap", winners);
        CHECK(lock >= 0 && lock < npes, "lock holds %ld", lock);
        CHECK(swapped >= 0 && swapped < npes, "swapped holds %ld", swapped);
        CHECK(bits_or == all, "or: 0x%lx", bits_or);
        CHECK(bits_xor == xor_all, "xor: 0x%lx", bits_xor);
        CHECK(bits_and == ~all, "and: 0x%lx", bits_and);
        CHECK(counter32 == ITERS * npes, "32-bit counter %d", counter32);
        CHECK(bits32_or == (unsigned)all, "32-bit or: 0x%x", bits32_or);
        CHECK(bits32_xor == (unsigned)all, "32-bit xor: 0x%x", bits32_xor);
        CHECK(bits32_and == ~(unsigned)all, "32-bit and: 0x%x", bits32_and);
    }

    /* barriers, each after a put the next round checks */
    for (rounds = 0; rounds < 50; ++rounds) {
        shmem_long_p(&slots[me], rounds, (me + 1) % npes);
        shmem_barrier_all();
        CHECK(slots[(me + npes - 1) % npes] == rounds, "barrier round %d",
              rounds);
        shmem_barrier_all();
    }

    shmem_free(remote);
    if (me == 0) {
        printf("shmem_syncmem: %d PEs, %s\n", npes,
               failures ? "FAILED" : "all checks passed");
    }
    shmem_finalize();
    return failures ? 1 : 0;
}
