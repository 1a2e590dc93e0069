/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test/gpu/cuda_reg: what cuMemAlloc memory is registered as. Buffers of
 * every size, parts of one, access, a thread with no context, and the
 * memory that is not CUDA memory to syncmem (managed, pinned host). VMM and
 * pool memory: cuda_reg_vmm.c. The expected ranges are what the case
 * allocated, or cuMemGetAddressRange's answer ("the allocation that
 * contains the input pointer"), not the pointer attributes syncmem reads.
 *
 * Each case opens fake MDs with the cache bounds it needs and closes them:
 * every MR it made is gone at its end (cuda_reg.c checks).
 */
#include "cuda_reg.h"

#include <pthread.h>
#include <string.h>


static void cuda_reg_case_in_use(void)
{
    uct_syncmem_md_t *md;

    EXPECT(uct_syncmem_cuda_in_use(), "not in use once the program loaded"
           " libcuda");
    md = cuda_reg_md_open(16, CUDA_REG_NO_LIMIT, IBV_ATOMIC_HCA);
    if (md != NULL) {
        EXPECT(uct_syncmem_cuda_can_reg(md), "can_reg 0 with a GPU that"
               " exports dma-bufs");
        cuda_reg_md_close(md);
    }
    cuda_reg_detail("syncmem uses the driver the program loaded");
}

/* cuMemAlloc puts small buffers at 512-byte steps in shared pages: each
 * one still gets an MR of exactly its allocation. */
static void cuda_reg_case_sizes(void)
{
#define CUDA_REG_SIZES 5
#define CUDA_REG_EACH  4
#define CUDA_REG_BUFS  (CUDA_REG_SIZES * CUDA_REG_EACH)
    static const size_t sizes[CUDA_REG_SIZES] = {8, 100, 3000, 4097, 10000};
    uct_syncmem_mem_t *memh[CUDA_REG_BUFS] = {NULL};
    CUdeviceptr dptr[CUDA_REG_BUFS]        = {0};
    unsigned live = reg_stub_live();
    char offsets[CUDA_REG_EACH * 8 + 1];
    uct_syncmem_md_t *md;
    CUdeviceptr start;
    size_t size, want;
    unsigned i;

    md = cuda_reg_md_open(CUDA_REG_BUFS, CUDA_REG_NO_LIMIT, IBV_ATOMIC_HCA);
    reg_stub_want_access = CUDA_REG_ACCESS_ALL;
    for (i = 0; (md != NULL) && (i < CUDA_REG_BUFS); ++i) {
        if (!CU(cu.cuMemAlloc(&dptr[i], sizes[i / CUDA_REG_EACH]))) {
            goto out;
        }
    }

    for (i = 0; (md != NULL) && (i < CUDA_REG_BUFS); ++i) {
        want = sizes[i / CUDA_REG_EACH];
        if ((i % CUDA_REG_EACH) == 0) {
            offsets[0] = '\0';
        }
        snprintf(offsets + strlen(offsets), sizeof(offsets) - strlen(offsets),
                 " 0x%llx", dptr[i] & (cuda_reg_page - 1));
        if ((i % CUDA_REG_EACH) == CUDA_REG_EACH - 1) {
            printf("# %zu B buffers at page offsets%s\n", want, offsets);
        }
        if (!cuda_reg_alloc_range(dptr[i], &start, &size) ||
            !cuda_reg_reg(md, dptr[i], want, &memh[i])) {
            continue;
        }
        /* the allocation starts where cuMemAlloc said, and is at least
         * what was asked; the MR is what cuMemGetAddressRange says */
        EXPECT((start == dptr[i]) && (size >= want), "%zu B at 0x%llx: the"
               " driver's allocation is 0x%llx+%zu", want, dptr[i], start,
               size);
        cuda_reg_mr_is(memh[i], start, size, "a cuMemAlloc buffer");
        if ((i % CUDA_REG_EACH) == 0) {
            printf("# %zu B: cuMemGetAddressRange says 0x%llx+%zu; MR"
                   " 0x%lx+%zu\n", want, start, size,
                   (uintptr_t)memh[i]->mr->addr, memh[i]->mr->length);
        }
    }
    EXPECT(reg_stub_live() == live + CUDA_REG_BUFS, "%u MRs for %u buffers",
           reg_stub_live() - live, CUDA_REG_BUFS);
    cuda_reg_detail("%u buffers of 8 to 10000 B: an MR each, of exactly its"
                    " allocation", CUDA_REG_BUFS);

out:
    for (i = 0; i < CUDA_REG_BUFS; ++i) {
        cuda_reg_dereg(md, &memh[i]);
    }
    cuda_reg_md_close(md);
    for (i = 0; i < CUDA_REG_BUFS; ++i) {
        cuda_reg_free(&dptr[i]);
    }
}

/* Any part of a buffer is served the buffer's region, counted: with no
 * unused region kept, it goes at the last dereg and not before. */
static void cuda_reg_case_interior(void)
{
    static const size_t offsets[] = {0, 1, 4095, 4096, 512 * UCS_KBYTE,
                                     UCS_MBYTE - 8, 0};
    const unsigned num            = ucs_static_array_size(offsets);
    uct_syncmem_mem_t *memh[ucs_static_array_size(offsets)] = {NULL};
    unsigned live                 = reg_stub_live();
    unsigned calls                = reg_stub_calls();
    uct_syncmem_cuda_info_t info  = {0};
    ucs_memory_type_t mem_type    = UCS_MEMORY_TYPE_HOST;
    CUdeviceptr dptr              = 0;
    uct_syncmem_mem_t *past;
    CUdeviceptr start;
    size_t size;
    uct_syncmem_md_t *md;
    ucs_status_t status;
    unsigned i;

    md = cuda_reg_md_open(0, 0, IBV_ATOMIC_HCA);
    if ((md == NULL) || !CU(cu.cuMemAlloc(&dptr, UCS_MBYTE)) ||
        !cuda_reg_alloc_range(dptr, &start, &size)) {
        goto out;
    }
    reg_stub_want_access = CUDA_REG_ACCESS_ALL;
    for (i = 0; i < num; ++i) {
        /* the last one is the whole buffer */
        cuda_reg_reg(md, dptr + offsets[i], (i == num - 1) ? UCS_MBYTE : 8,
                     &memh[i]);
        EXPECT(memh[i] == memh[0], "0x%llx+%zu: another memh than the"
               " buffer's start", dptr, offsets[i]);
    }
    EXPECT((reg_stub_live() == live + 1) && (reg_stub_calls() == calls + 1),
           "%u registrations for one buffer", reg_stub_calls() - calls);

    status = cuda_reg_try(md, dptr + UCS_MBYTE - 4, 8, &past);
    EXPECT(status == UCS_ERR_INVALID_PARAM, "8 bytes 4 before the end of the"
           " buffer: %s, not INVALID_PARAM", ucs_status_string(status));
    status = uct_syncmem_cuda_mem_info(cuda_reg_ptr(dptr + 4096), &info);
    EXPECT((status == UCS_OK) && (info.base == start) &&
           (info.size == size) && (info.ordinal == 0), "mem_info: %s,"
           " 0x%lx+%zu on GPU %d, not 0x%llx+%zu on GPU 0",
           ucs_status_string(status), info.base, info.size, info.ordinal,
           start, size);
    uct_syncmem_cuda_detect(&md->super, cuda_reg_ptr(dptr + 100), 1,
                            &mem_type);
    EXPECT(mem_type == UCS_MEMORY_TYPE_CUDA, "detect: %s",
           ucs_memory_type_names[mem_type]);

    for (i = 0; i < num; ++i) {
        cuda_reg_dereg(md, &memh[i]);
        EXPECT(reg_stub_live() == live + (i < num - 1), "after %u of %u"
               " deregs: %u MRs", i + 1, num, reg_stub_live() - live);
    }
    cuda_reg_detail("%u registrations at offsets 0 to 1 MiB - 8: one MR,"
                    " released at the last dereg", num);

out:
    for (i = 0; i < num; ++i) {
        cuda_reg_dereg(md, &memh[i]);
    }
    cuda_reg_md_close(md);
    cuda_reg_free(&dptr);
}

/* A region has every access the device grants: the MR made when local
 * read was asked for serves remote writes and atomics later. */
static void cuda_reg_case_access(void)
{
    uct_syncmem_mem_t *first = NULL, *second = NULL, *plain = NULL;
    uct_syncmem_md_t *md, *md_plain;
    CUdeviceptr dptr = 0;
    int access = 0, access_plain = 0;
    unsigned calls;

    md       = cuda_reg_md_open(16, CUDA_REG_NO_LIMIT, IBV_ATOMIC_HCA);
    md_plain = cuda_reg_md_open(16, CUDA_REG_NO_LIMIT, IBV_ATOMIC_NONE);
    if ((md == NULL) || (md_plain == NULL) ||
        !CU(cu.cuMemAlloc(&dptr, 64 * UCS_KBYTE))) {
        goto out;
    }

    reg_stub_want_access = 0;   /* local read */
    if (!cuda_reg_reg(md, dptr, 64, &first)) {
        goto out;
    }
    reg_stub_want_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                           IBV_ACCESS_REMOTE_ATOMIC;
    calls                = reg_stub_calls();
    if (!cuda_reg_reg(md, dptr, 64, &second)) {
        goto out;
    }
    access = reg_stub_access(second->mr);
    EXPECT((second == first) && (reg_stub_calls() == calls), "the second"
           " request was not served from the cache");
    EXPECT((access & (reg_stub_want_access | IBV_ACCESS_REMOTE_READ)) ==
           (reg_stub_want_access | IBV_ACCESS_REMOTE_READ), "the MR served"
           " grants 0x%x, not remote read, write and atomics", access);

    reg_stub_want_access = CUDA_REG_ACCESS_ALL;
    if (cuda_reg_reg(md_plain, dptr, 64, &plain)) {
        access_plain = reg_stub_access(plain->mr);
        EXPECT(!(access_plain & IBV_ACCESS_REMOTE_ATOMIC), "REMOTE_ATOMIC"
               " (0x%x) on a device without atomics", access_plain);
    }
    cuda_reg_detail("the MR made for local read has access 0x%x and serves"
                    " remote write and atomics; 0x%x on a device without"
                    " atomics", access, access_plain);

out:
    cuda_reg_dereg(md, &first);
    cuda_reg_dereg(md, &second);
    cuda_reg_dereg(md_plain, &plain);
    cuda_reg_md_close(md);
    cuda_reg_md_close(md_plain);
    cuda_reg_free(&dptr);
}

typedef struct {
    uct_syncmem_md_t *md;
    CUdeviceptr      dptr;
    CUcontext        before, after;
} cuda_reg_no_ctx_t;

static void *cuda_reg_no_ctx_thread(void *arg)
{
    cuda_reg_no_ctx_t *t = arg;
    uct_syncmem_mem_t *memh;

    if (CU(cu.cuCtxGetCurrent(&t->before)) &&
        cuda_reg_reg(t->md, t->dptr, 4096, &memh)) {
        CU(cu.cuCtxGetCurrent(&t->after));
        cuda_reg_dereg(t->md, &memh);
    }
    return NULL;
}

/* A thread that never made a context current registers a buffer of the
 * main thread's, and is left as it was. */
static void cuda_reg_case_no_context(void)
{
    cuda_reg_no_ctx_t t = {NULL};
    pthread_t thread;
    int ret;

    t.md = cuda_reg_md_open(16, CUDA_REG_NO_LIMIT, IBV_ATOMIC_HCA);
    if ((t.md == NULL) || !CU(cu.cuMemAlloc(&t.dptr, 4096))) {
        goto out;
    }
    reg_stub_want_access = CUDA_REG_ACCESS_ALL;
    ret = pthread_create(&thread, NULL, cuda_reg_no_ctx_thread, &t);
    if (!EXPECT(ret == 0, "pthread_create: %s", strerror(ret))) {
        goto out;
    }
    pthread_join(thread, NULL);
    EXPECT(t.before == NULL, "a new thread has a current context: not the"
           " case this is about");
    EXPECT(t.after == NULL, "the registration left context %p current on"
           " the thread", (void*)t.after);
    cuda_reg_detail("registered from a thread with no current context,"
                    " which still has none");

out:
    cuda_reg_md_close(t.md);
    cuda_reg_free(&t.dptr);
}

/* Memory the host can touch takes the host path. */
static void cuda_reg_case_host_memory(void)
{
    unsigned live          = reg_stub_live();
    unsigned calls         = reg_stub_calls();
    CUdeviceptr managed    = 0;
    void *pinned           = NULL;
    const char *kinds      = "pinned host memory";
    uct_syncmem_mem_t *memh;
    uct_syncmem_md_t *md;
    ucs_status_t status;

    md = cuda_reg_md_open(16, CUDA_REG_NO_LIMIT, IBV_ATOMIC_HCA);
    if ((md == NULL) || !CU(cu.cuMemAllocHost(&pinned, UCS_MBYTE))) {
        goto out;
    }
    status = uct_syncmem_cuda_reg(md, pinned, UCS_MBYTE, UCS_LOG_LEVEL_ERROR,
                                  &memh);
    EXPECT(status == UCS_ERR_NO_ELEM, "cuMemAllocHost memory: %s, not"
           " NO_ELEM", ucs_status_string(status));
    EXPECT(!uct_syncmem_cuda_owns(pinned), "owns cuMemAllocHost memory");

    if (cuda_reg_dev_attr(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY)) {
        if (!CU(cu.cuMemAllocManaged(&managed, UCS_MBYTE,
                                     CU_MEM_ATTACH_GLOBAL))) {
            goto out;
        }
        status = cuda_reg_try(md, managed, UCS_MBYTE, &memh);
        EXPECT(status == UCS_ERR_NO_ELEM, "managed memory: %s, not NO_ELEM",
               ucs_status_string(status));
        EXPECT(!uct_syncmem_cuda_owns(cuda_reg_ptr(managed)),
               "owns managed memory");
        kinds = "managed and pinned host memory";
    }
    EXPECT((reg_stub_live() == live) && (reg_stub_calls() == calls),
           "registered host-accessible memory as CUDA memory");
    cuda_reg_detail("%s: NO_ELEM (the host path)", kinds);

out:
    cuda_reg_md_close(md);
    cuda_reg_free(&managed);
    if (pinned != NULL) {
        CU(cu.cuMemFreeHost(pinned));
    }
}

const cuda_reg_case_t cuda_reg_memory_cases[] = {
    {"in-use",      cuda_reg_case_in_use},
    {"sizes",       cuda_reg_case_sizes},
    {"interior",    cuda_reg_case_interior},
    {"access",      cuda_reg_case_access},
    {"no-context",  cuda_reg_case_no_context},
    {"host-memory", cuda_reg_case_host_memory},
    {NULL,          NULL}
};
