/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test/gpu/cuda_reg: what each kind of CUDA memory is registered as.
 * Buffers of cuMemAlloc of every size, parts of one, access, a thread with
 * no context, pool (cuMemAllocAsync) and VMM (cuMemMap) memory, and the
 * memory that is not CUDA memory to syncmem (managed, pinned host).
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
    unsigned long long id;
    uct_syncmem_md_t *md;
    CUdeviceptr start;
    struct ibv_mr *mr;
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
        if (!cuda_reg_range(dptr[i], &start, &size, &id) ||
            !cuda_reg_reg(md, dptr[i], want, &memh[i])) {
            continue;
        }
        mr = memh[i]->mr;
        EXPECT(((uintptr_t)mr->addr == start) && (mr->length == size),
               "%zu B at 0x%llx: the MR is 0x%lx+%zu, not its allocation"
               " 0x%llx+%zu", want, dptr[i], (uintptr_t)mr->addr,
               mr->length, start, size);
        if (!EXPECT(size >= want, "%zu B at 0x%llx: the driver says its"
                    " allocation is %zu B", want, dptr[i], size) ||
            (start != dptr[i]) || (size != want)) {
            printf("# %zu B at 0x%llx: the driver's allocation is"
                   " 0x%llx+%zu\n", want, dptr[i], start, size);
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
    unsigned long long id;
    uct_syncmem_mem_t *past;
    CUdeviceptr start;
    size_t size;
    uct_syncmem_md_t *md;
    ucs_status_t status;
    unsigned i;

    md = cuda_reg_md_open(0, 0, IBV_ATOMIC_HCA);
    if ((md == NULL) || !CU(cu.cuMemAlloc(&dptr, UCS_MBYTE)) ||
        !cuda_reg_range(dptr, &start, &size, &id)) {
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

/* Stream-ordered memory: a pool's, with no context of its own. */
static void cuda_reg_case_async(void)
{
    static const size_t sizes[] = {UCS_MBYTE, 100};
    uct_syncmem_mem_t *memh[2] = {NULL};
    CUdeviceptr dptr[2]        = {0};
    char ranges[2][64]         = {"", ""};
    CUstream stream            = NULL;
    unsigned long long id;
    uct_syncmem_md_t *md;
    CUdeviceptr start;
    struct ibv_mr *mr;
    unsigned i;
    size_t size;

    if (!cuda_reg_dev_attr(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)) {
        cuda_reg_skip("GPU 0 has no memory pools (cuMemAllocAsync)");
        return;
    }
    md = cuda_reg_md_open(16, CUDA_REG_NO_LIMIT, IBV_ATOMIC_HCA);
    if ((md == NULL) ||
        !CU(cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING)) ||
        !CU(cu.cuMemAllocAsync(&dptr[0], sizes[0], stream)) ||
        !CU(cu.cuMemAllocAsync(&dptr[1], sizes[1], stream)) ||
        !CU(cu.cuStreamSynchronize(stream))) {
        goto out;
    }
    reg_stub_want_access = CUDA_REG_ACCESS_ALL;
    for (i = 0; i < 2; ++i) {
        if (!cuda_reg_range(dptr[i], &start, &size, &id) ||
            !cuda_reg_reg(md, dptr[i], sizes[i], &memh[i])) {
            continue;
        }
        mr = memh[i]->mr;
        EXPECT(((uintptr_t)mr->addr == start) && (mr->length == size),
               "%zu B at 0x%llx: the MR is 0x%lx+%zu, not its range"
               " 0x%llx+%zu", sizes[i], dptr[i], (uintptr_t)mr->addr,
               mr->length, start, size);
        snprintf(ranges[i], sizeof(ranges[i]), "%zu B in 0x%llx+%zu",
                 sizes[i], start, size);
    }
    cuda_reg_detail("pool buffers registered: %s; %s", ranges[0], ranges[1]);

out:
    cuda_reg_dereg(md, &memh[0]);
    cuda_reg_dereg(md, &memh[1]);
    cuda_reg_md_close(md);
    for (i = 0; i < 2; ++i) {
        if (dptr[i] != 0) {
            CU(cu.cuMemFreeAsync(dptr[i], stream));
        }
    }
    if (stream != NULL) {
        CU(cu.cuStreamSynchronize(stream));
        CU(cu.cuStreamDestroy(stream));
    }
}

/* num chunks of chunk bytes, each its own cuMemCreate allocation, mapped
 * side by side into one reserved range, read-write for GPU 0; 0 on
 * failure. The mappings hold the memory: the handles are released. */
static CUdeviceptr cuda_reg_vmm_map(const CUmemAllocationProp *prop,
                                    size_t chunk, unsigned num)
{
    CUmemAccessDesc access = {
        .location = prop->location,
        .flags    = CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    };
    CUmemGenericAllocationHandle handle;
    CUdeviceptr base = 0;
    unsigned i, mapped;
    int ok;

    if (!CU(cu.cuMemAddressReserve(&base, chunk * num, 0, 0, 0))) {
        return 0;
    }
    for (mapped = 0; mapped < num; ++mapped) {
        if (!CU(cu.cuMemCreate(&handle, chunk, prop, 0))) {
            break;
        }
        ok = CU(cu.cuMemMap(base + mapped * chunk, chunk, 0, handle, 0));
        CU(cu.cuMemRelease(handle));
        if (!ok) {
            break;
        }
    }
    if ((mapped == num) &&
        CU(cu.cuMemSetAccess(base, chunk * num, &access, 1))) {
        return base;
    }
    for (i = 0; i < mapped; ++i) {
        CU(cu.cuMemUnmap(base + i * chunk, chunk));
    }
    CU(cu.cuMemAddressFree(base, chunk * num));
    return 0;
}

static void cuda_reg_vmm_unmap(CUdeviceptr base, size_t chunk, unsigned num)
{
    unsigned i;

    if (base != 0) {
        for (i = 0; i < num; ++i) {
            CU(cu.cuMemUnmap(base + i * chunk, chunk));
        }
        CU(cu.cuMemAddressFree(base, chunk * num));
    }
}

/* Virtual memory management: each chunk mapped is its own allocation. A
 * buffer across two is refused before anything is registered. */
static void cuda_reg_case_vmm(void)
{
    uct_syncmem_mem_t *memh[3] = {NULL};
    CUmemAllocationProp prop   = {0};
    CUdeviceptr one = 0, two = 0;
    uct_syncmem_md_t *md = NULL;
    unsigned live, calls, i;
    uct_syncmem_mem_t *span;
    ucs_status_t status[2];
    size_t chunk = 0;

    if (!cuda_reg_dev_attr(
                CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)) {
        cuda_reg_skip("GPU 0 has no virtual memory management (cuMemMap)");
        return;
    }
    prop.type          = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id   = cuda_reg_dev;
    /* as NCCL allocates memory for RDMA */
    prop.allocFlags.gpuDirectRDMACapable = !!cuda_reg_dev_attr(
            CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED);
    if (!CU(cu.cuMemGetAllocationGranularity(
                &chunk, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM)) ||
        ((one = cuda_reg_vmm_map(&prop, chunk, 1)) == 0) ||
        ((two = cuda_reg_vmm_map(&prop, chunk, 2)) == 0)) {
        goto out;
    }
    md = cuda_reg_md_open(16, CUDA_REG_NO_LIMIT, IBV_ATOMIC_HCA);
    if (md == NULL) {
        goto out;
    }
    reg_stub_want_access = CUDA_REG_ACCESS_ALL;

    if (cuda_reg_reg(md, one, chunk, &memh[0])) {
        EXPECT(((uintptr_t)memh[0]->mr->addr == one) &&
               (memh[0]->mr->length == chunk), "one chunk 0x%llx+%zu: MR"
               " 0x%lx+%zu", one, chunk, (uintptr_t)memh[0]->mr->addr,
               memh[0]->mr->length);
    }

    live      = reg_stub_live();
    calls     = reg_stub_calls();
    status[0] = cuda_reg_try(md, two, 2 * chunk, &span);
    status[1] = cuda_reg_try(md, two + chunk - 8, 16, &span);
    EXPECT((status[0] == UCS_ERR_INVALID_PARAM) &&
           (status[1] == UCS_ERR_INVALID_PARAM), "a buffer across two"
           " chunks: %s (all of both), %s (16 B across the boundary), not"
           " INVALID_PARAM", ucs_status_string(status[0]),
           ucs_status_string(status[1]));
    EXPECT((reg_stub_live() == live) && (reg_stub_calls() == calls),
           "registered something for a buffer it refused");

    for (i = 0; i < 2; ++i) {
        if (cuda_reg_reg(md, two + i * chunk, chunk, &memh[1 + i])) {
            EXPECT((uintptr_t)memh[1 + i]->mr->addr == two + i * chunk,
                   "chunk %u: MR at 0x%lx", i,
                   (uintptr_t)memh[1 + i]->mr->addr);
        }
    }
    EXPECT(reg_stub_live() == live + 2, "%u MRs for the two chunks",
           reg_stub_live() - live);
    cuda_reg_detail("chunks of %zu KiB: one alone registers; across two"
                    " refused (INVALID_PARAM), each of them registers",
                    chunk >> 10);

out:
    for (i = 0; i < 3; ++i) {
        cuda_reg_dereg(md, &memh[i]);
    }
    cuda_reg_md_close(md);
    cuda_reg_vmm_unmap(one, chunk, 1);
    cuda_reg_vmm_unmap(two, chunk, 2);
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
    {"async",       cuda_reg_case_async},
    {"vmm",         cuda_reg_case_vmm},
    {"host-memory", cuda_reg_case_host_memory},
    {NULL,          NULL}
};
