/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A stand-in for the CUDA driver (built as libcuda.so.1, loaded by path by
 * test_cuda_load.cc and test_cuda_driver.cc only): one GPU, no real memory,
 * and the driver's answers as its documentation (cuda.h) gives them:
 *
 * - before cuInit() the calls answer CUDA_ERROR_NOT_INITIALIZED; the child
 *   of a fork() after cuInit() cannot initialise the driver;
 * - cuPointerGetAttributes answers host memory with success and zeroed
 *   attributes; for device memory RANGE_START_ADDR/RANGE_SIZE are the
 *   allocation, or for VMM memory "the mappable address range ... (e.g.
 *   from cuMemAddressReserve)", mapped or not; BUFFER_ID is unique per
 *   allocation (each mapping, each pool allocation) for the life of the
 *   process; IS_LEGACY_CUDA_IPC_CAPABLE only for cuMemAlloc memory;
 *   MAPPED whether a backing allocation is mapped there;
 * - cuMemGetAddressRange gives "the size of the mapped region" (one mapping,
 *   one allocation), CUDA_ERROR_NOT_FOUND where nothing is mapped, and
 *   CUDA_ERROR_INVALID_CONTEXT with no context current;
 * - cuMemGetHandleForAddressRange takes a page-aligned range of one
 *   allocation or reservation that is "fully mapped";
 * - cuPointerSetAttribute(SYNC_MEMOPS) is refused for VMM and pool memory
 *   (CUDA_ERROR_NOT_SUPPORTED, as UCX saw: openucx/ucx#9895);
 *   cuCtxSetFlags overwrites the current context's flags.
 *
 * Pool memory is modelled as a reservation whose allocations are its
 * mapped pieces, so that RANGE_START/RANGE_SIZE give the pool, not the
 * allocation: the harder of the two answers a driver may give.
 *
 * Built with SYNCMEM_STAND_IN_OLD, it is a driver older than CUDA 11.7: no
 * cuMemGetHandleForAddressRange, and no cuCtxSetFlags (CUDA 12.1).
 *
 * It says nothing else about real CUDA; test/gpu/cuda_reg.c runs the same
 * code against the real driver. The tests drive it with the
 * syncmem_stand_in_* functions and counters.
 */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

typedef int CUresult;
#define CUDA_SUCCESS               0
#define CUDA_ERROR_INVALID_VALUE   1
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_NO_DEVICE       100
#define CUDA_ERROR_INVALID_DEVICE  101
#define CUDA_ERROR_INVALID_CONTEXT 201
#define CUDA_ERROR_NOT_FOUND       500
#define CUDA_ERROR_NOT_SUPPORTED   801

#define STAND_IN_PAGE      4096ul
#define STAND_IN_RANGES    64
#define STAND_IN_PIECES    512

enum {
    SYNCMEM_STAND_IN_ALLOC = 1,   /* cuMemAlloc */
    SYNCMEM_STAND_IN_VMM,         /* cuMemAddressReserve + cuMemMap */
    SYNCMEM_STAND_IN_POOL         /* cuMemAllocAsync's pool */
};

int syncmem_stand_in_inits;      /* cuInit() calls */
int syncmem_stand_in_retains;    /* cuDevicePrimaryCtxRetain() calls */
int syncmem_stand_in_attr_syncs; /* SYNC_MEMOPS set on a pointer */
int syncmem_stand_in_set_flags;  /* cuCtxSetFlags() calls that worked */
int syncmem_stand_in_refuse_flags; /* set: cuCtxSetFlags refuses */
int syncmem_stand_in_exports;    /* dma-bufs exported */
unsigned syncmem_stand_in_ctx_flags = 0x1; /* the context's: SCHED_SPIN */

static pid_t stand_in_inited; /* the process that initialised it */
static char stand_in_ctx;     /* GPU 0's primary context is &stand_in_ctx */
static __thread void *stand_in_current[8];
static __thread int stand_in_depth;

static struct {
    uintptr_t start;
    size_t    size;
    int       kind;   /* 0: free slot */
} stand_in_ranges[STAND_IN_RANGES];

static struct {
    uintptr_t          start;
    size_t             size;
    unsigned long long id;  /* 0: free slot */
} stand_in_pieces[STAND_IN_PIECES];

static uintptr_t stand_in_next_va = 0x7e0000000000ul;
static unsigned long long stand_in_next_id = 1000;


CUresult cuInit(unsigned flags)
{
    ++syncmem_stand_in_inits;
    if ((stand_in_inited != 0) && (stand_in_inited != getpid())) {
        return CUDA_ERROR_NOT_INITIALIZED; /* a fork child's */
    }
    stand_in_inited = getpid();
    return CUDA_SUCCESS;
}

static int stand_in_ready(void)
{
    return stand_in_inited == getpid();
}

static int stand_in_range_at(uintptr_t address)
{
    int i;

    for (i = 0; i < STAND_IN_RANGES; ++i) {
        if (stand_in_ranges[i].kind && (address >= stand_in_ranges[i].start) &&
            (address - stand_in_ranges[i].start < stand_in_ranges[i].size)) {
            return i;
        }
    }
    return -1;
}

static int stand_in_piece_at(uintptr_t address)
{
    int i;

    for (i = 0; i < STAND_IN_PIECES; ++i) {
        if (stand_in_pieces[i].id && (address >= stand_in_pieces[i].start) &&
            (address - stand_in_pieces[i].start < stand_in_pieces[i].size)) {
            return i;
        }
    }
    return -1;
}

/* The test's controls: what the application allocates and maps. */

/* A reservation of size (VMM or POOL) at start, which the test chose (a
 * host mapping of its own, for a real HCA to register through ibv_reg_mr
 * as a peer-memory module would): start, or 0. */
uintptr_t syncmem_stand_in_reserve_at(uintptr_t start, size_t size, int kind)
{
    int i;

    for (i = 0; (i < STAND_IN_RANGES) && stand_in_ranges[i].kind; ++i) {
    }
    if ((i == STAND_IN_RANGES) || (size == 0) || (start == 0) ||
        (stand_in_range_at(start) >= 0) ||
        (stand_in_range_at(start + size - 1) >= 0)) {
        return 0;
    }
    stand_in_ranges[i].start = start;
    stand_in_ranges[i].size  = size;
    stand_in_ranges[i].kind  = kind;
    return start;
}

/* A reservation of size (VMM or POOL) at a 2 MiB boundary of addresses
 * nothing uses (never dereferenced): its address. */
uintptr_t syncmem_stand_in_reserve(size_t size, int kind)
{
    uintptr_t start = syncmem_stand_in_reserve_at(stand_in_next_va, size,
                                                  kind);

    /* a 2 MiB gap after each: nothing is ever next to it */
    stand_in_next_va += ((size + (4ul << 20) - 1) & ~((2ul << 20) - 1));
    return start;
}

/* Memory mapped at [start, start + size) of a reservation: its buffer id,
 * or 0 if that is not free reserved space. */
unsigned long long syncmem_stand_in_map(uintptr_t start, size_t size)
{
    int r = stand_in_range_at(start), i;

    if ((r < 0) || (size == 0) ||
        (start + size > stand_in_ranges[r].start + stand_in_ranges[r].size)) {
        return 0;
    }
    for (i = 0; i < STAND_IN_PIECES; ++i) {
        if (stand_in_pieces[i].id && (start < stand_in_pieces[i].start +
                                      stand_in_pieces[i].size) &&
            (stand_in_pieces[i].start < start + size)) {
            return 0;   /* overlaps a mapping */
        }
    }
    for (i = 0; (i < STAND_IN_PIECES) && stand_in_pieces[i].id; ++i) {
    }
    if (i == STAND_IN_PIECES) {
        return 0;
    }
    stand_in_pieces[i].start = start;
    stand_in_pieces[i].size  = size;
    stand_in_pieces[i].id    = stand_in_next_id++;
    return stand_in_pieces[i].id;
}

/* What was mapped at start goes: 0, or -1 if nothing was. */
int syncmem_stand_in_unmap(uintptr_t start)
{
    int i = stand_in_piece_at(start);

    if ((i < 0) || (stand_in_pieces[i].start != start)) {
        return -1;
    }
    stand_in_pieces[i].id = 0;
    return 0;
}

/* cuMemAlloc: its own range and piece. */
uintptr_t syncmem_stand_in_alloc(size_t size)
{
    uintptr_t start = syncmem_stand_in_reserve(size, SYNCMEM_STAND_IN_ALLOC);

    return ((start != 0) && syncmem_stand_in_map(start, size)) ? start : 0;
}

/* Frees a reservation or an allocation and all mapped in it. */
int syncmem_stand_in_free(uintptr_t start)
{
    int r = stand_in_range_at(start), i;

    if ((r < 0) || (stand_in_ranges[r].start != start)) {
        return -1;
    }
    for (i = 0; i < STAND_IN_PIECES; ++i) {
        if (stand_in_pieces[i].id && (stand_in_range_at(
                stand_in_pieces[i].start) == r)) {
            stand_in_pieces[i].id = 0;
        }
    }
    stand_in_ranges[r].kind = 0;
    return 0;
}

/* The driver API. */

CUresult cuGetErrorString(CUresult res, const char **str)
{
    *str = "stand-in error";
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
    if (!stand_in_ready()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    *count = 1;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(int *dev, int ordinal)
{
    if (!stand_in_ready()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (ordinal != 0) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *dev = 0;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *value, int attribute, int dev)
{
    if (!stand_in_ready()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    /* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED */
    *value = (attribute == 124);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char *bus_id, int len, int dev)
{
    return CUDA_ERROR_NO_DEVICE;   /* a GPU on no bus: topology unknown */
}

CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev)
{
    if (!stand_in_ready()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    ++syncmem_stand_in_retains;
    *ctx = &stand_in_ctx;
    return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent_v2(void *ctx)
{
    if (stand_in_depth == 8) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    stand_in_current[stand_in_depth++] = ctx;
    return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent_v2(void **ctx)
{
    if (stand_in_depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *ctx = stand_in_current[--stand_in_depth];
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(void **ctx)
{
    *ctx = (stand_in_depth > 0) ? stand_in_current[stand_in_depth - 1] : NULL;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetFlags(unsigned *flags)
{
    if (stand_in_depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *flags = syncmem_stand_in_ctx_flags;
    return CUDA_SUCCESS;
}

#ifndef SYNCMEM_STAND_IN_OLD
CUresult cuCtxSetFlags(unsigned flags)
{
    if (stand_in_depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (syncmem_stand_in_refuse_flags) {
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    ++syncmem_stand_in_set_flags;
    syncmem_stand_in_ctx_flags = flags;
    return CUDA_SUCCESS;
}
#endif

CUresult cuPointerGetAttributes(unsigned num, int *attributes, void **data,
                                unsigned long long ptr)
{
    int r = stand_in_range_at(ptr), p = stand_in_piece_at(ptr);
    int kind = (r >= 0) ? stand_in_ranges[r].kind : 0;
    unsigned i;

    if (!stand_in_ready()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    for (i = 0; i < num; ++i) {
        switch (attributes[i]) {
        case 1:  /* CONTEXT */
            *(void**)data[i] = ((p >= 0) &&
                                (kind == SYNCMEM_STAND_IN_ALLOC)) ?
                               &stand_in_ctx : NULL;
            break;
        case 2:  /* MEMORY_TYPE */
            *(unsigned*)data[i] = (p >= 0) ? 2 : 0;  /* DEVICE */
            break;
        case 7:  /* BUFFER_ID */
            *(unsigned long long*)data[i] = (p >= 0) ?
                                            stand_in_pieces[p].id : 0;
            break;
        case 8:  /* IS_MANAGED */
            *(unsigned*)data[i] = 0;
            break;
        case 9:  /* DEVICE_ORDINAL */
            *(int*)data[i] = (r >= 0) ? 0 : -2;
            break;
        case 10: /* IS_LEGACY_CUDA_IPC_CAPABLE */
            *(unsigned*)data[i] = (p >= 0) && (kind == SYNCMEM_STAND_IN_ALLOC);
            break;
        case 11: /* RANGE_START_ADDR */
            *(unsigned long long*)data[i] = (r >= 0) ?
                                            stand_in_ranges[r].start : 0;
            break;
        case 12: /* RANGE_SIZE */
            *(size_t*)data[i] = (r >= 0) ? stand_in_ranges[r].size : 0;
            break;
        case 13: /* MAPPED */
            *(unsigned*)data[i] = (p >= 0);
            break;
        default:
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    return CUDA_SUCCESS;
}

CUresult cuPointerSetAttribute(const void *value, int attribute,
                               unsigned long long ptr)
{
    int r = stand_in_range_at(ptr);

    if (!stand_in_ready()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if ((attribute != 6) || (stand_in_piece_at(ptr) < 0)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (stand_in_ranges[r].kind != SYNCMEM_STAND_IN_ALLOC) {
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    ++syncmem_stand_in_attr_syncs;
    return CUDA_SUCCESS;
}

CUresult cuMemGetAddressRange_v2(unsigned long long *base, size_t *size,
                                 unsigned long long ptr)
{
    int p = stand_in_piece_at(ptr);

    if (!stand_in_ready()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (stand_in_depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (p < 0) {
        return CUDA_ERROR_NOT_FOUND;
    }
    *base = stand_in_pieces[p].start;
    *size = stand_in_pieces[p].size;
    return CUDA_SUCCESS;
}

#ifndef SYNCMEM_STAND_IN_OLD
/* A dma-buf of the range: /dev/null stands for it (the host tests never
 * give it to an HCA). */
CUresult cuMemGetHandleForAddressRange(void *handle, unsigned long long ptr,
                                       size_t size, int type,
                                       unsigned long long flags)
{
    int r = stand_in_range_at(ptr), p;
    unsigned long long a;
    int fd;

    if (!stand_in_ready()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (stand_in_depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if ((type != 1) || (flags != 0) || (size == 0) || (r < 0) ||
        ((ptr | size) & (STAND_IN_PAGE - 1)) ||
        (ptr + size > stand_in_ranges[r].start + stand_in_ranges[r].size)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (a = ptr; a < ptr + size;
         a = stand_in_pieces[p].start + stand_in_pieces[p].size) {
        p = stand_in_piece_at(a);
        if (p < 0) {
            return CUDA_ERROR_INVALID_VALUE;   /* not fully mapped */
        }
    }
    fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    ++syncmem_stand_in_exports;
    *(int*)handle = fd;
    return CUDA_SUCCESS;
}
#endif
