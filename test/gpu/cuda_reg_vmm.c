/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test/gpu/cuda_reg: GPU memory as NCCL and PyTorch allocate it, and what
 * syncmem does to the GPU around it.
 *
 *   sync-memops  SYNC_MEMOPS read back: on a cuMemAlloc buffer, and on the
 *                context for VMM memory (CUDA 12.1's cuCtxSetFlags)
 *   cumem        NCCL's cuMem allocation: one cuMemCreate of whole
 *                granules (cuMemGetAllocationGranularity), mapped
 *   expandable   PyTorch's expandable segments: a large reservation with
 *                2 MiB pieces mapped on demand; a buffer in one piece, across
 *                two, into an unmapped hole (refused), from inside one
 *   remap        a piece unmapped and mapped again at the same address: a
 *                new registration, the old MR gone at its release
 *   pool         cuMemAllocAsync: several allocations of one pool, each
 *                its own MR that reaches no other's start
 *   free-after-release  GPU memory (cuMemGetInfo) back to where it was
 *                once a buffer is released and freed, cuMemAlloc and VMM
 *   two-gpus     GPU 1's memory registered from a thread whose context is
 *                GPU 0's
 *
 * The expected ranges are what the case mapped or allocated itself, never
 * what the pointer attributes syncmem reads say.
 */
#include "cuda_reg.h"

#include <dlfcn.h>
#include <string.h>


/* VMM memory of GPU 0 as NCCL asks for it (RDMA-capable where the GPU
 * says so); 0 (and the case skipped) if the GPU has none. */
static int cuda_reg_vmm_prop(CUmemAllocationProp *prop, size_t *granularity)
{
    if (!cuda_reg_dev_attr(
                CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)) {
        cuda_reg_skip("GPU 0 has no virtual memory management (cuMemMap)");
        return 0;
    }
    memset(prop, 0, sizeof(*prop));
    prop->type          = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id   = cuda_reg_dev;
    prop->allocFlags.gpuDirectRDMACapable = !!cuda_reg_dev_attr(
            CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED);
    return CU(cu.cuMemGetAllocationGranularity(
            granularity, prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
}

/* size bytes of a new allocation mapped at addr, read-write for GPU 0; the
 * mapping holds the memory (the handle is released). */
static int cuda_reg_vmm_map(const CUmemAllocationProp *prop, CUdeviceptr addr,
                            size_t size)
{
    CUmemAccessDesc access = {
        .location = prop->location,
        .flags    = CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    };
    CUmemGenericAllocationHandle handle;
    int ok;

    if (!CU(cu.cuMemCreate(&handle, size, prop, 0))) {
        return 0;
    }
    ok = CU(cu.cuMemMap(addr, size, 0, handle, 0));
    CU(cu.cuMemRelease(handle));
    if (ok && !CU(cu.cuMemSetAccess(addr, size, &access, 1))) {
        CU(cu.cuMemUnmap(addr, size));
        ok = 0;
    }
    return ok;
}

/* A reservation of num pieces of piece bytes, those in mapped (a bit each)
 * mapped; 0 on failure, with nothing left. */
static CUdeviceptr cuda_reg_vmm_reserve(const CUmemAllocationProp *prop,
                                        size_t piece, unsigned num,
                                        unsigned mapped)
{
    CUdeviceptr base = 0;
    unsigned i;

    if (!CU(cu.cuMemAddressReserve(&base, piece * num, piece, 0, 0))) {
        return 0;
    }
    for (i = 0; i < num; ++i) {
        if ((mapped & UCS_BIT(i)) &&
            !cuda_reg_vmm_map(prop, base + i * piece, piece)) {
            break;
        }
    }
    if (i == num) {
        return base;
    }
    while (i-- > 0) {
        if (mapped & UCS_BIT(i)) {
            CU(cu.cuMemUnmap(base + i * piece, piece));
        }
    }
    CU(cu.cuMemAddressFree(base, piece * num));
    return 0;
}

static void cuda_reg_vmm_free(CUdeviceptr base, size_t piece, unsigned num,
                              unsigned mapped)
{
    unsigned i;

    if (base == 0) {
        return;
    }
    for (i = 0; i < num; ++i) {
        if (mapped & UCS_BIT(i)) {
            CU(cu.cuMemUnmap(base + i * piece, piece));
        }
    }
    CU(cu.cuMemAddressFree(base, piece * num));
}

/* The driver's cuCtxSetFlags (CUDA 12.1), or NULL. */
static void *cuda_reg_ctx_set_flags(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void *sym = (lib != NULL) ? dlsym(lib, "cuCtxSetFlags") : NULL;

    if (lib != NULL) {
        dlclose(lib);
    }
    return sym;
}

/* First of these cases: no VMM memory registered yet, so no context has
 * the flag, and a cuMemAlloc buffer must have the pointer attribute. */
static void cuda_reg_case_sync_memops(void)
{
    uct_syncmem_mem_t *memh[2] = {NULL, NULL};
    CUmemAllocationProp prop;
    unsigned flags = 0, before = 0;
    CUdeviceptr dptr = 0, vmm = 0;
    uct_syncmem_md_t *md;
    size_t granularity = 0;
    unsigned value = 0;

    md = cuda_reg_md_open(0, 0, IBV_ATOMIC_HCA);
    reg_stub_want_access = CUDA_REG_ACCESS_ALL;
    if ((md == NULL) || !CU(cu.cuMemAlloc(&dptr, 64 * UCS_KBYTE)) ||
        !CU(cu.cuCtxGetFlags(&before)) ||
        !cuda_reg_reg(md, dptr, 64, &memh[0]) ||
        !CU(cu.cuPointerGetAttribute(&value, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                                     dptr))) {
        goto out;
    }
    EXPECT(value == 1, "a registered cuMemAlloc buffer has SYNC_MEMOPS %u",
           value);
    EXPECT(!(before & CU_CTX_SYNC_MEMOPS), "the context had SYNC_MEMOPS"
           " (0x%x) before any VMM registration", before);

    if (!cuda_reg_vmm_prop(&prop, &granularity) ||
        ((vmm = cuda_reg_vmm_reserve(&prop, granularity, 1, 1)) == 0) ||
        !cuda_reg_reg(md, vmm, granularity, &memh[1]) ||
        !CU(cu.cuCtxGetFlags(&flags))) {
        goto out;
    }
    if (cuda_reg_ctx_set_flags() == NULL) {
        cuda_reg_detail("the pointer attribute on cuMemAlloc memory; this"
                        " driver has no cuCtxSetFlags for VMM memory");
        goto out;
    }
    EXPECT(flags & CU_CTX_SYNC_MEMOPS, "the context's flags are 0x%x after"
           " a VMM registration: no CU_CTX_SYNC_MEMOPS", flags);
    EXPECT((flags & ~CU_CTX_SYNC_MEMOPS) == (before & ~CU_CTX_SYNC_MEMOPS),
           "the context's other flags changed: 0x%x, then 0x%x", before,
           flags);
    cuda_reg_detail("the pointer attribute on cuMemAlloc memory; for VMM"
                    " memory the context's flags 0x%x -> 0x%x", before,
                    flags);

out:
    cuda_reg_dereg(md, &memh[0]);
    cuda_reg_dereg(md, &memh[1]);
    cuda_reg_md_close(md);
    cuda_reg_free(&dptr);
    cuda_reg_vmm_free(vmm, granularity, 1, 1);
}

/* NCCL's cuMem allocation: a buffer rounded up to whole granules, one
 * cuMemCreate, mapped where it reserved. The MR is that mapping. */
static void cuda_reg_case_cumem(void)
{
    uct_syncmem_mem_t *memh[2] = {NULL, NULL};
    CUmemAllocationProp prop;
    uct_syncmem_md_t *md = NULL;
    CUdeviceptr base = 0;
    size_t granularity = 0, size = 0;

    if (!cuda_reg_vmm_prop(&prop, &granularity)) {
        return;
    }
    size = ucs_align_up(3 * UCS_MBYTE + 1, granularity);
    base = cuda_reg_vmm_reserve(&prop, size, 1, 1);
    md   = cuda_reg_md_open(0, 0, IBV_ATOMIC_HCA);
    reg_stub_want_access = CUDA_REG_ACCESS_ALL;
    if ((base == 0) || (md == NULL) ||
        !cuda_reg_reg(md, base + 4096, 8192, &memh[0]) ||
        !cuda_reg_reg(md, base, size, &memh[1])) {
        goto out;
    }
    cuda_reg_mr_is(memh[0], base, size, "8 KiB inside the mapping");
    EXPECT(memh[1] == memh[0], "the whole mapping got another registration"
           " than a part of it");
    cuda_reg_detail("3 MiB + 1 in granules of %zu KiB: one MR of the %zu KiB"
                    " mapping", granularity >> 10, size >> 10);

out:
    cuda_reg_dereg(md, &memh[0]);
    cuda_reg_dereg(md, &memh[1]);
    cuda_reg_md_close(md);
    cuda_reg_vmm_free(base, size, 1, 1);
}

/* 2 MiB, or the granularity if larger. */
static size_t cuda_reg_piece(size_t granularity)
{
    return ucs_align_up(2 * UCS_MBYTE, granularity);
}

/* PyTorch's expandable segments: pieces 0-2 of 64 mapped, the rest
 * reserved only. */
static void cuda_reg_case_expandable(void)
{
    uct_syncmem_mem_t *memh[4] = {NULL};
    uct_syncmem_cuda_info_t info = {0};
    const unsigned num = 64, mapped = 0x7;
    unsigned i, calls, live;
    uct_syncmem_md_t *md = NULL;
    CUmemAllocationProp prop;
    CUdeviceptr base = 0;
    size_t granularity, piece = 0;
    uct_syncmem_mem_t *refused;
    ucs_status_t status[2];

    if (!cuda_reg_vmm_prop(&prop, &granularity)) {
        return;
    }
    piece = cuda_reg_piece(granularity);
    base  = cuda_reg_vmm_reserve(&prop, piece, num, mapped);
    md    = cuda_reg_md_open(16, CUDA_REG_NO_LIMIT, IBV_ATOMIC_HCA);
    reg_stub_want_access = CUDA_REG_ACCESS_ALL;
    if ((base == 0) || (md == NULL)) {
        goto out;
    }

    if (cuda_reg_reg(md, base + piece + piece / 2, 4096, &memh[0])) {
        cuda_reg_mr_is(memh[0], base + piece, piece, "inside piece 1");
    }
    if (cuda_reg_reg(md, base + piece - 8, 16, &memh[1])) {
        cuda_reg_mr_is(memh[1], base, 2 * piece, "across pieces 0 and 1");
    }
    if (cuda_reg_reg(md, base + 100, 3 * piece - 200, &memh[2])) {
        cuda_reg_mr_is(memh[2], base, 3 * piece, "across pieces 0 to 2");
    }
    EXPECT((uct_syncmem_cuda_mem_info(cuda_reg_ptr(base + piece + 5),
                                      &info) == UCS_OK) &&
           (info.base == base + piece) && (info.size == piece),
           "mem_info in piece 1: 0x%lx+%zu, not the piece 0x%llx+%zu",
           info.base, info.size, base + piece, piece);

    live      = reg_stub_live();
    calls     = reg_stub_calls();
    status[0] = cuda_reg_try(md, base + 2 * piece + 100, piece, &refused);
    status[1] = cuda_reg_try(md, base + 3 * piece + 100, 8, &refused);
    EXPECT(status[0] == UCS_ERR_INVALID_ADDR, "into the unmapped hole: %s,"
           " not INVALID_ADDR", ucs_status_string(status[0]));
    EXPECT(status[1] != UCS_OK, "inside the unmapped hole: registered");
    EXPECT((reg_stub_live() == live) && (reg_stub_calls() == calls),
           "registered something for a buffer it refused");
    cuda_reg_detail("pieces of %zu KiB in a %zu MiB reservation: one piece,"
                    " two, three register as those pieces; into the hole"
                    " %s, inside it %s", piece >> 10, (piece * num) >> 20,
                    ucs_status_string(status[0]),
                    ucs_status_string(status[1]));

out:
    for (i = 0; i < 4; ++i) {
        cuda_reg_dereg(md, &memh[i]);
    }
    cuda_reg_md_close(md);
    cuda_reg_vmm_free(base, piece, num, mapped);
}

/* A piece unmapped while registered, and mapped again at the same address:
 * a new registration; the old MR goes when it is released. */
static void cuda_reg_case_remap(void)
{
    uct_syncmem_mem_t *memh[2] = {NULL, NULL};
    uint32_t lkey[2] = {0, 0};
    uct_syncmem_md_t *md = NULL;
    CUmemAllocationProp prop;
    CUdeviceptr base = 0;
    size_t granularity, piece = 0;
    unsigned mapped = 0x3;

    if (!cuda_reg_vmm_prop(&prop, &granularity)) {
        return;
    }
    piece = cuda_reg_piece(granularity);
    base  = cuda_reg_vmm_reserve(&prop, piece, 2, mapped);
    md    = cuda_reg_md_open(16, CUDA_REG_NO_LIMIT, IBV_ATOMIC_HCA);
    reg_stub_want_access = CUDA_REG_ACCESS_ALL;
    if ((base == 0) || (md == NULL) ||
        !cuda_reg_reg(md, base + piece, 4096, &memh[0])) {
        goto out;
    }
    lkey[0] = cuda_reg_lkey(memh[0]);

    mapped &= ~UCS_BIT(1);
    if (!CU(cu.cuMemUnmap(base + piece, piece)) ||
        !cuda_reg_vmm_map(&prop, base + piece, piece)) {
        goto out;
    }
    mapped |= UCS_BIT(1);
    if (!cuda_reg_reg(md, base + piece, 4096, &memh[1])) {
        goto out;
    }
    lkey[1] = cuda_reg_lkey(memh[1]);
    EXPECT(lkey[1] != lkey[0], "the piece mapped again was served the old"
           " MR");
    cuda_reg_mr_is(memh[1], base + piece, piece, "the piece mapped again");
    cuda_reg_dereg(md, &memh[0]);
    EXPECT(!reg_stub_is_live(lkey[0]), "the old piece's MR outlived its"
           " release, though a cache keeps 16");
    cuda_reg_dereg(md, &memh[1]);
    EXPECT(reg_stub_is_live(lkey[1]), "the live piece's MR was not kept");
    cuda_reg_detail("MR %u for the piece, MR %u once mapped again; the old"
                    " one released with its handle", lkey[0], lkey[1]);

out:
    cuda_reg_dereg(md, &memh[0]);
    cuda_reg_dereg(md, &memh[1]);
    cuda_reg_md_close(md);
    cuda_reg_vmm_free(base, piece, 2, mapped);
}

/* Stream-ordered memory: several allocations of GPU 0's default pool,
 * each its own MR, reaching no other allocation's start. */
static void cuda_reg_case_pool(void)
{
#define CUDA_REG_POOL 4
    static const size_t sizes[CUDA_REG_POOL] = {UCS_MBYTE, 100, 3000,
                                                64 * UCS_KBYTE};
    uct_syncmem_mem_t *memh[CUDA_REG_POOL] = {NULL};
    CUdeviceptr dptr[CUDA_REG_POOL]        = {0};
    char lengths[128]                      = "";
    CUstream stream                        = NULL;
    uct_syncmem_md_t *md;
    uintptr_t start, end;
    unsigned i, j;

    if (!cuda_reg_dev_attr(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)) {
        cuda_reg_skip("GPU 0 has no memory pools (cuMemAllocAsync)");
        return;
    }
    md = cuda_reg_md_open(0, 0, IBV_ATOMIC_HCA);
    if ((md == NULL) ||
        !CU(cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING))) {
        goto out;
    }
    for (i = 0; i < CUDA_REG_POOL; ++i) {
        if (!CU(cu.cuMemAllocAsync(&dptr[i], sizes[i], stream))) {
            goto out;
        }
    }
    if (!CU(cu.cuStreamSynchronize(stream))) {
        goto out;
    }
    reg_stub_want_access = CUDA_REG_ACCESS_ALL;
    for (i = 0; i < CUDA_REG_POOL; ++i) {
        if (!cuda_reg_reg(md, dptr[i], sizes[i], &memh[i])) {
            continue;
        }
        start = (uintptr_t)memh[i]->mr->addr;
        end   = start + memh[i]->mr->length;
        EXPECT(start == dptr[i], "%zu B at 0x%llx: the MR starts at 0x%lx",
               sizes[i], dptr[i], start);
        for (j = 0; j < CUDA_REG_POOL; ++j) {
            EXPECT((j == i) || (dptr[j] < start) || (dptr[j] >= end),
                   "the MR 0x%lx+%zu of %zu B reaches the allocation at"
                   " 0x%llx", start, end - start, sizes[i], dptr[j]);
        }
        snprintf(lengths + strlen(lengths), sizeof(lengths) - strlen(lengths),
                 " %zu->%zu", sizes[i], end - start);
    }
    cuda_reg_detail("%u allocations of one pool, MR lengths:%s",
                    CUDA_REG_POOL, lengths);

out:
    for (i = 0; i < CUDA_REG_POOL; ++i) {
        cuda_reg_dereg(md, &memh[i]);
    }
    cuda_reg_md_close(md);
    for (i = 0; i < CUDA_REG_POOL; ++i) {
        if (dptr[i] != 0) {
            CU(cu.cuMemFreeAsync(dptr[i], stream));
        }
    }
    if (stream != NULL) {
        CU(cu.cuStreamSynchronize(stream));
        CU(cu.cuStreamDestroy(stream));
    }
}

/* UCP lets go of a buffer, then the application frees it: with the
 * defaults (nothing kept), the GPU has the memory back. */
static void cuda_reg_case_free_after_release(void)
{
    size_t before, after[2] = {0, 0}, size, slack, granularity = 0;
    uct_syncmem_mem_t *memh = NULL;
    CUmemAllocationProp prop;
    CUdeviceptr dptr = 0, vmm = 0;
    uct_syncmem_md_t *md;

    md     = cuda_reg_md_open(0, UCS_GBYTE, IBV_ATOMIC_HCA);
    before = cuda_reg_mem_free();
    size   = ucs_align_down_pow2(ucs_min(UCS_GBYTE, before / 8),
                                 2 * UCS_MBYTE);
    slack  = size / 16;
    reg_stub_want_access = CUDA_REG_ACCESS_ALL;
    if ((md == NULL) || !EXPECT(size > 0, "no GPU memory free") ||
        !CU(cu.cuMemAlloc(&dptr, size)) ||
        !cuda_reg_reg(md, dptr, size, &memh)) {
        goto out;
    }
    cuda_reg_dereg(md, &memh);
    cuda_reg_free(&dptr);
    after[0] = cuda_reg_mem_back(before, slack);
    EXPECT(after[0] + slack >= before, "cuMemAlloc: %zu MiB free after the"
           " release and cuMemFree, %zu MiB before", after[0] >> 20,
           before >> 20);

    if (!cuda_reg_dev_attr(
                CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)) {
        cuda_reg_detail("%zu MiB: free %zu MiB before, %zu after the"
                        " release and cuMemFree (no VMM on GPU 0)",
                        size >> 20, before >> 20, after[0] >> 20);
        goto out;
    }
    if (!cuda_reg_vmm_prop(&prop, &granularity)) {
        goto out;
    }
    size = ucs_align_up(size, granularity);
    vmm  = cuda_reg_vmm_reserve(&prop, size, 1, 1);
    if ((vmm == 0) || !cuda_reg_reg(md, vmm, size, &memh)) {
        goto out;
    }
    cuda_reg_dereg(md, &memh);
    cuda_reg_vmm_free(vmm, size, 1, 1);
    vmm      = 0;
    after[1] = cuda_reg_mem_back(before, slack);
    EXPECT(after[1] + slack >= before, "VMM: %zu MiB free after the release"
           " and cuMemUnmap, %zu MiB before", after[1] >> 20, before >> 20);
    cuda_reg_detail("%zu MiB: free %zu MiB before, %zu after cuMemAlloc's,"
                    " %zu after VMM's", size >> 20, before >> 20,
                    after[0] >> 20, after[1] >> 20);

out:
    cuda_reg_dereg(md, &memh);
    cuda_reg_md_close(md);
    cuda_reg_free(&dptr);
    cuda_reg_vmm_free(vmm, size, 1, 1);
}

/* GPU 1's memory, registered from this thread, whose context is GPU 0's:
 * its MR, its GPU in mem_info, and GPU 0's context current after. */
static void cuda_reg_case_two_gpus(void)
{
    uct_syncmem_cuda_info_t info = {0};
    uct_syncmem_mem_t *memh      = NULL;
    CUcontext ctx1 = NULL, popped, current = NULL, before = NULL;
    CUdeviceptr dptr = 0;
    uct_syncmem_md_t *md = NULL;
    CUdevice dev1;
    int count = 0;

    if (!CU(cu.cuDeviceGetCount(&count))) {
        return;
    }
    if (count < 2) {
        cuda_reg_skip("one GPU here");
        return;
    }
    if (!CU(cu.cuDeviceGet(&dev1, 1)) ||
        !CU(cu.cuDevicePrimaryCtxRetain(&ctx1, dev1))) {
        return;
    }
    if (CU(cu.cuCtxPushCurrent(ctx1))) {
        CU(cu.cuMemAlloc(&dptr, UCS_MBYTE));
        CU(cu.cuCtxPopCurrent(&popped));
    }
    md = cuda_reg_md_open(0, 0, IBV_ATOMIC_HCA);
    reg_stub_want_access = CUDA_REG_ACCESS_ALL;
    if ((dptr == 0) || (md == NULL) || !CU(cu.cuCtxGetCurrent(&before)) ||
        !cuda_reg_reg(md, dptr, UCS_MBYTE, &memh)) {
        goto out;
    }
    cuda_reg_mr_is(memh, dptr, UCS_MBYTE, "GPU 1's buffer");
    CU(cu.cuCtxGetCurrent(&current));
    EXPECT(current == before, "the registration left context %p current,"
           " not GPU 0's %p", (void*)current, (void*)before);
    EXPECT((uct_syncmem_cuda_mem_info(cuda_reg_ptr(dptr), &info) == UCS_OK) &&
           (info.ordinal == 1), "mem_info says GPU %d", info.ordinal);
    cuda_reg_detail("%d GPUs: GPU 1's buffer registered from GPU 0's"
                    " context", count);

out:
    cuda_reg_dereg(md, &memh);
    cuda_reg_md_close(md);
    if ((dptr != 0) && CU(cu.cuCtxPushCurrent(ctx1))) {
        cuda_reg_free(&dptr);
        CU(cu.cuCtxPopCurrent(&popped));
    }
    CU(cu.cuDevicePrimaryCtxRelease(dev1));
}

const cuda_reg_case_t cuda_reg_vmm_cases[] = {
    {"sync-memops",        cuda_reg_case_sync_memops},
    {"cumem",              cuda_reg_case_cumem},
    {"expandable",         cuda_reg_case_expandable},
    {"remap",              cuda_reg_case_remap},
    {"pool",               cuda_reg_case_pool},
    {"free-after-release", cuda_reg_case_free_after_release},
    {"two-gpus",           cuda_reg_case_two_gpus},
    {NULL,                 NULL}
};
