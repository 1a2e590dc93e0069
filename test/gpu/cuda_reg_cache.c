/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test/gpu/cuda_reg: the life of syncmem's CUDA registrations. Buffers
 * freed while registered or while cached unused, and allocated again at
 * the same address; the bounds on what is kept; threads at once; what it
 * costs; and closing an MD.
 *
 * MRs are told apart by their lkeys, which reg_stub.c never reuses (a
 * region's memory may be). Each case closes the MDs it opened.
 */
#include "cuda_reg.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


/* Bit i of live: whether the MR with lkeys[i] must still be registered. */
static void cuda_reg_expect_live(const char *when, const uint32_t *lkeys,
                                 unsigned num, unsigned live)
{
    unsigned i;
    int is_live;

    for (i = 0; i < num; ++i) {
        is_live = reg_stub_is_live(lkeys[i]);
        EXPECT(is_live == !!(live & UCS_BIT(i)), "%s: buffer %u's MR is %s",
               when, i, is_live ? "still registered" : "released");
    }
}

/* A large buffer: 1 GiB, or an eighth of what is free; whole 2 MiB. */
static size_t cuda_reg_large(size_t free_bytes, size_t max)
{
    return ucs_align_down_pow2(ucs_min(max, free_bytes / 8), 2 * UCS_MBYTE);
}

/* Freed while registered: the MR holds the memory; its last dereg lets
 * go of it, as the buffer it was for is gone. */
static void cuda_reg_case_free_registered(void)
{
    size_t before, freed = 0, after = 0, size;
    uct_syncmem_mem_t *memh = NULL;
    CUdeviceptr dptr        = 0;
    uct_syncmem_md_t *md;
    uint32_t lkey;

    md     = cuda_reg_md_open(16, CUDA_REG_NO_LIMIT, IBV_ATOMIC_HCA);
    before = cuda_reg_mem_free();
    size   = cuda_reg_large(before, UCS_GBYTE);
    reg_stub_want_access = CUDA_REG_ACCESS_ALL;
    if ((md == NULL) || !EXPECT(size > 0, "no GPU memory free") ||
        !CU(cu.cuMemAlloc(&dptr, size)) ||
        !cuda_reg_reg(md, dptr, size, &memh)) {
        goto out;
    }
    lkey = cuda_reg_lkey(memh);
    cuda_reg_free(&dptr);
    freed = cuda_reg_mem_free();
    EXPECT(freed + size / 2 <= before, "%zu MiB freed while registered came"
           " back at once (free %zu MiB, %zu before): the dma-buf did not"
           " hold it", size >> 20, freed >> 20, before >> 20);

    cuda_reg_dereg(md, &memh);
    EXPECT(!reg_stub_is_live(lkey), "the MR of a freed buffer outlived its"
           " last dereg");
    after = cuda_reg_mem_back(before, size / 16);
    EXPECT(after + size / 16 >= before, "free GPU memory %zu MiB after the"
           " dereg, %zu MiB before the buffer", after >> 20, before >> 20);
    cuda_reg_detail("%zu MiB: free %zu MiB before, %zu after cuMemFree while"
                    " registered, %zu after the dereg", size >> 20,
                    before >> 20, freed >> 20, after >> 20);

out:
    cuda_reg_dereg(md, &memh);
    cuda_reg_md_close(md);
    cuda_reg_free(&dptr);
}

/* Freed while kept unused in the cache: the next registration of another
 * buffer lets go of it. */
static void cuda_reg_case_free_unused(void)
{
    size_t before, freed = 0, after = 0, size;
    uct_syncmem_mem_t *memh = NULL;
    CUdeviceptr dptr = 0, other = 0;
    uct_syncmem_md_t *md;
    unsigned live;
    uint32_t lkey;

    md     = cuda_reg_md_open(16, CUDA_REG_NO_LIMIT, IBV_ATOMIC_HCA);
    before = cuda_reg_mem_free();
    size   = cuda_reg_large(before, 256 * UCS_MBYTE);
    live   = reg_stub_live();
    reg_stub_want_access = CUDA_REG_ACCESS_ALL;
    if ((md == NULL) || !EXPECT(size > 0, "no GPU memory free") ||
        !CU(cu.cuMemAlloc(&dptr, size)) ||
        !cuda_reg_reg(md, dptr, size, &memh)) {
        goto out;
    }
    lkey = cuda_reg_lkey(memh);
    cuda_reg_dereg(md, &memh);
    EXPECT(reg_stub_is_live(lkey), "an unused region of a live buffer was"
           " not kept");
    cuda_reg_free(&dptr);
    freed = cuda_reg_mem_free();

    if (!CU(cu.cuMemAlloc(&other, UCS_MBYTE)) ||
        !cuda_reg_reg(md, other, UCS_MBYTE, &memh)) {
        goto out;
    }
    EXPECT(!reg_stub_is_live(lkey), "the unused region of a freed buffer"
           " was kept past the next registration");
    EXPECT(reg_stub_live() == live + 1, "%u MRs, want 1",
           reg_stub_live() - live);
    after = cuda_reg_mem_back(before, size / 16 + UCS_MBYTE);
    EXPECT(after + size / 16 + UCS_MBYTE >= before, "free GPU memory %zu MiB"
           " after the next registration, %zu MiB before", after >> 20,
           before >> 20);
    cuda_reg_detail("%zu MiB: free %zu MiB before, %zu freed while cached,"
                    " %zu after the next registration", size >> 20,
                    before >> 20, freed >> 20, after >> 20);

out:
    cuda_reg_dereg(md, &memh);
    cuda_reg_md_close(md);
    cuda_reg_free(&dptr);
    cuda_reg_free(&other);
}

/* A buffer freed and allocated again at the same address is a new buffer:
 * a new registration, and the old one is let go. */
static void cuda_reg_case_realloc(void)
{
#define CUDA_REG_TRIES 64
    CUdeviceptr others[CUDA_REG_TRIES] = {0};
    const size_t size       = 2 * UCS_MBYTE;
    unsigned long long id[2] = {0, 0};
    uct_syncmem_mem_t *memh = NULL;
    CUdeviceptr dptr = 0, old, start;
    uint32_t lkey[2] = {0, 0};
    uct_syncmem_md_t *md;
    unsigned i, live;
    size_t range;

    md   = cuda_reg_md_open(16, CUDA_REG_NO_LIMIT, IBV_ATOMIC_HCA);
    live = reg_stub_live();
    reg_stub_want_access = CUDA_REG_ACCESS_ALL;
    if ((md == NULL) || !CU(cu.cuMemAlloc(&dptr, size)) ||
        !cuda_reg_range(dptr, &start, &range, &id[0]) ||
        !cuda_reg_reg(md, dptr, size, &memh)) {
        goto out;
    }
    lkey[0] = cuda_reg_lkey(memh);
    cuda_reg_dereg(md, &memh);   /* kept, unused */
    old = dptr;
    cuda_reg_free(&dptr);

    /* the others, kept, steer the allocator elsewhere */
    for (i = 0; (i < CUDA_REG_TRIES) && CU(cu.cuMemAlloc(&dptr, size)) &&
                (dptr != old); ++i) {
        others[i] = dptr;
        dptr      = 0;
    }
    if (dptr != old) {
        cuda_reg_skip("cuMemAlloc did not give 0x%llx back in %u tries", old,
                      i);
        goto out;
    }
    if (!cuda_reg_range(dptr, &start, &range, &id[1]) ||
        !cuda_reg_reg(md, dptr, size, &memh)) {
        goto out;
    }
    lkey[1] = cuda_reg_lkey(memh);
    EXPECT(id[1] != id[0], "buffer id %llu again", id[0]);
    EXPECT(lkey[1] != lkey[0], "the new buffer was served the old one's MR");
    EXPECT(!reg_stub_is_live(lkey[0]), "the old buffer's MR was kept");
    EXPECT(reg_stub_live() == live + 1, "%u MRs, want 1",
           reg_stub_live() - live);
    cuda_reg_detail("0x%llx allocated again (after %u others): buffer id"
                    " %llu, then %llu; MR %u, then %u", old, i, id[0], id[1],
                    lkey[0], lkey[1]);

out:
    cuda_reg_dereg(md, &memh);
    cuda_reg_md_close(md);
    cuda_reg_free(&dptr);
    for (i = 0; i < CUDA_REG_TRIES; ++i) {
        cuda_reg_free(&others[i]);
    }
}

/* Registers num buffers of size and deregisters them in the order given
 * (an index twice: registered again in between, then deregistered). */
static int cuda_reg_bounds_run(const char *what, uct_syncmem_md_t *md,
                               const CUdeviceptr *dptr, size_t size,
                               unsigned num, uint32_t *lkeys,
                               const unsigned *order, const unsigned *live,
                               unsigned steps)
{
    uct_syncmem_mem_t *memh[8] = {NULL};
    char when[64];
    unsigned i, b;

    for (i = 0; i < num; ++i) {
        if (!cuda_reg_reg(md, dptr[i], size, &memh[i])) {
            return 0;
        }
        lkeys[i] = cuda_reg_lkey(memh[i]);
    }
    for (i = 0; i < steps; ++i) {
        b = order[i];
        if ((memh[b] == NULL) &&
            (!cuda_reg_reg(md, dptr[b], size, &memh[b]) ||
             !EXPECT(cuda_reg_lkey(memh[b]) == lkeys[b], "%s: buffer %u"
                     " registered again, not served its unused region",
                     what, b))) {
            return 0;
        }
        cuda_reg_dereg(md, &memh[b]);
        snprintf(when, sizeof(when), "%s, dereg %u of buffer %u", what,
                 i + 1, b);
        cuda_reg_expect_live(when, lkeys, num, live[i]);
    }
    return 1;
}

/* Unused regions beyond either bound go, the least lately used first. */
static void cuda_reg_case_bounds(void)
{
    /* 3 kept: buffer 0 is used again after 1 and 2, so goes after them */
    static const unsigned count_order[] = {0, 1, 2, 0, 3, 4, 5};
    static const unsigned count_live[]  = {0x3f, 0x3f, 0x3f, 0x3f, 0x3d,
                                           0x39, 0x38};
    /* 2.5 buffers' bytes kept */
    static const unsigned bytes_order[] = {0, 1, 2, 3};
    static const unsigned bytes_live[]  = {0xf, 0xf, 0xe, 0xc};
    CUdeviceptr dptr[6]                 = {0};
    uct_syncmem_md_t *md[2]             = {NULL, NULL};
    uint32_t lkeys[6];
    unsigned long long id;
    CUdeviceptr start;
    size_t size;
    unsigned i;

    reg_stub_want_access = CUDA_REG_ACCESS_ALL;
    for (i = 0; i < 6; ++i) {
        if (!CU(cu.cuMemAlloc(&dptr[i], UCS_MBYTE))) {
            goto out;
        }
    }
    if (!cuda_reg_range(dptr[0], &start, &size, &id)) {
        goto out;
    }
    md[0] = cuda_reg_md_open(3, CUDA_REG_NO_LIMIT, IBV_ATOMIC_HCA);
    md[1] = cuda_reg_md_open(100, size * 5 / 2, IBV_ATOMIC_HCA);
    if ((md[0] != NULL) && (md[1] != NULL) &&
        cuda_reg_bounds_run("3 kept", md[0], dptr, UCS_MBYTE, 6, lkeys,
                            count_order, count_live,
                            ucs_static_array_size(count_order)) &&
        cuda_reg_bounds_run("2.5 MiB kept", md[1], dptr, UCS_MBYTE, 4, lkeys,
                            bytes_order, bytes_live,
                            ucs_static_array_size(bytes_order))) {
        cuda_reg_detail("3 unused kept: the 3 least lately used of 6 go;"
                        " %zu bytes kept: 2 of 4 buffers of %zu",
                        size * 5 / 2, size);
    }

out:
    cuda_reg_md_close(md[0]);
    cuda_reg_md_close(md[1]);
    for (i = 0; i < 6; ++i) {
        cuda_reg_free(&dptr[i]);
    }
}

#define CUDA_REG_THREADS 8
#define CUDA_REG_SHARED  4
#define CUDA_REG_ITERS   1000

typedef struct {
    uct_syncmem_md_t  *md;
    CUdeviceptr       own;
    size_t            own_size;
    const CUdeviceptr *shared;
    size_t            shared_size;
    unsigned          seed;
} cuda_reg_thread_t;

/* Its own buffer (a random part, sometimes twice) and a shared one at
 * once, released in a random order. */
static void *cuda_reg_thread(void *arg)
{
    cuda_reg_thread_t *t = arg;
    uct_syncmem_mem_t *memh[3];
    unsigned it, s;
    size_t offset;

    for (it = 0; it < CUDA_REG_ITERS; ++it) {
        memset(memh, 0, sizeof(memh));
        offset = rand_r(&t->seed) % t->own_size;
        s      = rand_r(&t->seed) % CUDA_REG_SHARED;
        if (!cuda_reg_reg(t->md, t->own + offset,
                          1 + rand_r(&t->seed) % (t->own_size - offset),
                          &memh[0]) ||
            !cuda_reg_reg(t->md, t->shared[s], t->shared_size, &memh[1]) ||
            (((it % 3) == 0) &&
             !cuda_reg_reg(t->md, t->own, t->own_size, &memh[2]))) {
            it = CUDA_REG_ITERS;   /* failed: release, and stop */
        }
        if (rand_r(&t->seed) & 1) {
            cuda_reg_dereg(t->md, &memh[1]);
        }
        cuda_reg_dereg(t->md, &memh[2]);
        cuda_reg_dereg(t->md, &memh[0]);
        cuda_reg_dereg(t->md, &memh[1]);
    }
    return NULL;
}

/* Threads at once on one MD, whose cache keeps few: hits, misses and
 * evictions race. */
static void cuda_reg_case_threads(void)
{
    cuda_reg_thread_t t[CUDA_REG_THREADS];
    CUdeviceptr shared[CUDA_REG_SHARED] = {0};
    pthread_t thread[CUDA_REG_THREADS];
    unsigned live = reg_stub_live(), calls = reg_stub_calls();
    unsigned i, started = 0;
    uct_syncmem_md_t *md;
    int ret;

    memset(t, 0, sizeof(t));
    md = cuda_reg_md_open(4, CUDA_REG_NO_LIMIT, IBV_ATOMIC_HCA);
    reg_stub_want_access = CUDA_REG_ACCESS_ALL;
    for (i = 0; (md != NULL) && (i < CUDA_REG_SHARED); ++i) {
        if (!CU(cu.cuMemAlloc(&shared[i], 128 * UCS_KBYTE))) {
            goto out;
        }
    }
    for (i = 0; (md != NULL) && (i < CUDA_REG_THREADS); ++i) {
        t[i].md          = md;
        t[i].own_size    = 64 * UCS_KBYTE + i * 4096;
        t[i].shared      = shared;
        t[i].shared_size = 128 * UCS_KBYTE;
        t[i].seed        = i + 1;
        if (!CU(cu.cuMemAlloc(&t[i].own, t[i].own_size))) {
            goto out;
        }
    }
    for (started = 0; (md != NULL) && (started < CUDA_REG_THREADS);
         ++started) {
        ret = pthread_create(&thread[started], NULL, cuda_reg_thread,
                             &t[started]);
        if (!EXPECT(ret == 0, "pthread_create: %s", strerror(ret))) {
            break;
        }
    }
    for (i = 0; i < started; ++i) {
        pthread_join(thread[i], NULL);
    }
    EXPECT(reg_stub_live() <= live + 4, "%u MRs after the threads, and 4"
           " unused at most are kept", reg_stub_live() - live);
    cuda_reg_detail("%u threads x %u iterations: %u registrations made, %u"
                    " MRs kept at the end", started, CUDA_REG_ITERS,
                    reg_stub_calls() - calls, reg_stub_live() - live);

out:
    cuda_reg_md_close(md);
    for (i = 0; i < CUDA_REG_THREADS; ++i) {
        cuda_reg_free(&t[i].own);
    }
    for (i = 0; i < CUDA_REG_SHARED; ++i) {
        cuda_reg_free(&shared[i]);
    }
}

static int cuda_reg_cmp(const void *a, const void *b)
{
    double x = *(const double*)a, y = *(const double*)b;

    return (x > y) - (x < y);
}

static double cuda_reg_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double cuda_reg_median(double *samples, unsigned num)
{
    qsort(samples, num, sizeof(*samples), cuda_reg_cmp);
    return samples[num / 2];
}

/* The median of a hundred calls of uct_syncmem_cuda_owns, per call. */
static double cuda_reg_time_owns(const void *address)
{
    double samples[101], start;
    unsigned i, j;

    for (i = 0; i < 101; ++i) {
        start = cuda_reg_now_ns();
        for (j = 0; j < 100; ++j) {
            uct_syncmem_cuda_owns(address);
        }
        samples[i] = (cuda_reg_now_ns() - start) / 100;
    }
    return cuda_reg_median(samples, 101);
}

/* The median of one registration in md (then released), once warm. */
static double cuda_reg_time_reg(uct_syncmem_md_t *md, CUdeviceptr dptr,
                                unsigned num)
{
    double samples[1001], start;
    uct_syncmem_mem_t *memh;
    unsigned i;

    for (i = 0; i <= num; ++i) {
        start = cuda_reg_now_ns();
        if (!cuda_reg_reg(md, dptr, 4096, &memh)) {
            return 0;
        }
        samples[i] = cuda_reg_now_ns() - start;
        cuda_reg_dereg(md, &memh);
    }
    return cuda_reg_median(samples + 1, num);   /* the first is warm-up */
}

/* What syncmem's CUDA path costs (reported, not judged). */
static void cuda_reg_case_timing(void)
{
    uct_syncmem_md_t *cached, *uncached;
    double owns_host, owns_cuda;
    CUdeviceptr dptr = 0;
    char host[64];

    cached   = cuda_reg_md_open(16, CUDA_REG_NO_LIMIT, IBV_ATOMIC_HCA);
    uncached = cuda_reg_md_open(0, 0, IBV_ATOMIC_HCA);
    reg_stub_want_access = CUDA_REG_ACCESS_ALL;
    if ((cached != NULL) && (uncached != NULL) &&
        CU(cu.cuMemAlloc(&dptr, UCS_MBYTE))) {
        owns_host = cuda_reg_time_owns(host);
        owns_cuda = cuda_reg_time_owns(cuda_reg_ptr(dptr));
        cuda_reg_detail("medians: owns %.0f ns on host memory, %.0f ns on"
                        " CUDA memory; registration %.0f ns missed (export"
                        " and stub), %.0f ns hit", owns_host, owns_cuda,
                        cuda_reg_time_reg(uncached, dptr, 200),
                        cuda_reg_time_reg(cached, dptr, 1000));
    }
    cuda_reg_md_close(cached);
    cuda_reg_md_close(uncached);
    cuda_reg_free(&dptr);
}

/* Closing an MD releases every registration, used or not. */
static void cuda_reg_case_cleanup(void)
{
    uct_syncmem_mem_t *memh[4] = {NULL};
    CUdeviceptr dptr[3]        = {0};
    unsigned live              = reg_stub_live();
    uct_syncmem_md_t *md;
    unsigned i;

    md = cuda_reg_md_open(16, CUDA_REG_NO_LIMIT, IBV_ATOMIC_HCA);
    reg_stub_want_access = CUDA_REG_ACCESS_ALL;
    for (i = 0; (md != NULL) && (i < 3); ++i) {
        if (!CU(cu.cuMemAlloc(&dptr[i], 64 * UCS_KBYTE))) {
            goto out;
        }
    }
    /* 0 used, 1 unused, 2 used twice */
    if ((md == NULL) || !cuda_reg_reg(md, dptr[0], 64, &memh[0]) ||
        !cuda_reg_reg(md, dptr[1], 64, &memh[1]) ||
        !cuda_reg_reg(md, dptr[2], 64, &memh[2]) ||
        !cuda_reg_reg(md, dptr[2], 64, &memh[3])) {
        goto out;
    }
    cuda_reg_dereg(md, &memh[1]);
    EXPECT(reg_stub_live() == live + 3, "%u MRs for 3 buffers",
           reg_stub_live() - live);
    printf("# 2 warnings of registrations still in use expected:\n");
    uct_syncmem_cuda_cleanup(md);
    EXPECT(reg_stub_live() == live, "%u MRs left after cleanup",
           reg_stub_live() - live);
    EXPECT(md->cuda == NULL, "the MD still has its CUDA cache");
    cuda_reg_detail("2 used and 1 unused: no MR left");

out:
    if ((md != NULL) && (md->cuda != NULL)) {
        for (i = 0; i < 4; ++i) {
            cuda_reg_dereg(md, &memh[i]);
        }
    }
    cuda_reg_md_close(md);   /* a second cleanup does nothing */
    for (i = 0; i < 3; ++i) {
        cuda_reg_free(&dptr[i]);
    }
}

const cuda_reg_case_t cuda_reg_cache_cases[] = {
    {"free-registered", cuda_reg_case_free_registered},
    {"free-unused",     cuda_reg_case_free_unused},
    {"realloc",         cuda_reg_case_realloc},
    {"bounds",          cuda_reg_case_bounds},
    {"threads",         cuda_reg_case_threads},
    {"timing",          cuda_reg_case_timing},
    {"cleanup",         cuda_reg_case_cleanup},
    {NULL,              NULL}
};
