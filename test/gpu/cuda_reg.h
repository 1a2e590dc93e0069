/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test/gpu/cuda_reg: syncmem's CUDA code on a GPU machine with no HCA.
 *
 * The program is syncmem_cuda.c and syncmem_cuda_driver.c as the module
 * compiles them, reg_stub.c in place of the three verbs calls of
 * syncmem_md.c, and the cases: cuda_reg.c (the harness, the driver, and
 * the cases before it is initialised), cuda_reg_memory.c (cuMemAlloc and
 * host memory), cuda_reg_vmm.c (VMM and pool memory as NCCL and PyTorch
 * allocate it, SYNC_MEMOPS, memory returned, two GPUs) and
 * cuda_reg_cache.c (the life of registrations).
 * It loads libcuda.so.1 itself, as an application does, and links nothing
 * of CUDA: built where only the toolkit's headers are, it runs wherever a
 * driver is.
 */
#ifndef SYNCMEM_TEST_CUDA_REG_H_
#define SYNCMEM_TEST_CUDA_REG_H_

#include <uct_syncmem/syncmem_md.h>
#include <cuda.h>

#define CUDA_REG_TIMEOUT 60  /* seconds a case may take */


/*
 * reg_stub.c: what was registered. Every MR gets a new lkey (== rkey), in
 * increasing order, so a case can tell a new registration from an old one
 * whose memory was reused.
 */

/* What the case asked for: every dma-buf MR must grant it. */
extern int reg_stub_want_access;

unsigned reg_stub_live(void);               /* MRs registered now */
unsigned reg_stub_calls(void);              /* dma-buf registrations made */
int reg_stub_is_live(uint32_t lkey);
int reg_stub_access(const struct ibv_mr *mr);  /* -1: not a live MR */


/*
 * cuda_reg.c: the harness and the driver.
 */

/* Fails the case running, with a "FAIL <case>: ..." line (the first few
 * times); from any thread. */
void cuda_reg_fail(const char *fmt, ...) UCS_F_PRINTF(1, 2);
/* The case's "ok" line says this (the last call wins). */
void cuda_reg_detail(const char *fmt, ...) UCS_F_PRINTF(1, 2);
/* The case could not run here: "SKIP <case>: why", and no "ok" line; from
 * the case's own thread. */
void cuda_reg_skip(const char *fmt, ...) UCS_F_PRINTF(1, 2);

#define EXPECT(_cond, ...) ((_cond) || (cuda_reg_fail(__VA_ARGS__), 0))

/* The driver calls the cases make, by the versioned names cuda.h maps
 * the plain ones to (cuMemAlloc is cuMemAlloc_v2): cu.cuMemAlloc(...). */
#define CUDA_REG_FUNCS(_f) \
    _f(cuInit) _f(cuGetErrorString) _f(cuDriverGetVersion) \
    _f(cuDeviceGetCount) _f(cuDeviceGet) _f(cuDeviceGetAttribute) \
    _f(cuDeviceGetName) _f(cuDevicePrimaryCtxRetain) _f(cuCtxSetCurrent) \
    _f(cuCtxGetCurrent) _f(cuCtxGetFlags) _f(cuCtxPushCurrent) \
    _f(cuCtxPopCurrent) _f(cuDevicePrimaryCtxRelease) \
    _f(cuMemGetAddressRange) \
    _f(cuMemAlloc) _f(cuMemFree) _f(cuMemGetInfo) _f(cuMemAllocHost) \
    _f(cuMemFreeHost) _f(cuMemAllocManaged) _f(cuMemAllocAsync) \
    _f(cuMemFreeAsync) _f(cuStreamCreate) _f(cuStreamDestroy) \
    _f(cuStreamSynchronize) _f(cuPointerGetAttribute) \
    _f(cuMemGetAllocationGranularity) _f(cuMemCreate) _f(cuMemRelease) \
    _f(cuMemAddressReserve) _f(cuMemAddressFree) _f(cuMemMap) \
    _f(cuMemUnmap) _f(cuMemSetAccess)

#define CUDA_REG_FIELD(_name) __typeof__(_name) *_name;
extern struct cuda_reg_driver {
    CUDA_REG_FUNCS(CUDA_REG_FIELD)
} cu;
#undef CUDA_REG_FIELD

/* 1 if res is CUDA_SUCCESS, else fails the case with what and why. */
int cuda_reg_cu_ok(CUresult res, const char *what);
#define CU(_call) cuda_reg_cu_ok((_call), #_call)

extern CUdevice cuda_reg_dev;    /* GPU 0, whose primary context the main
                                  * thread has current */
extern size_t   cuda_reg_page;

/* A device attribute of GPU 0 (0 if the driver cannot tell). */
int cuda_reg_dev_attr(CUdevice_attribute attr);
/* The allocation or reservation ptr is in, as the pointer attributes
 * RANGE_START_ADDR/RANGE_SIZE tell it, and its buffer id; 0 on failure. */
int cuda_reg_range(CUdeviceptr ptr, CUdeviceptr *start, size_t *size,
                   unsigned long long *buffer_id);
/* The allocation ptr is in, as cuMemGetAddressRange tells it ("the base
 * address and size of the allocation"); 0 on failure. */
int cuda_reg_alloc_range(CUdeviceptr ptr, CUdeviceptr *base, size_t *size);
/* GPU memory free now (cuMemGetInfo); 0 on failure. */
size_t cuda_reg_mem_free(void);
/* Waits (2 s at most) for free GPU memory to come back to want - slack:
 * what is free then. */
size_t cuda_reg_mem_back(size_t want, size_t slack);

/* A fake MD with only what syncmem_cuda.c reads: it takes dma-bufs, has no
 * peer memory, and the given atomics; its CUDA cache has the bounds. */
uct_syncmem_md_t *cuda_reg_md_open(unsigned max_unused,
                                   size_t max_unused_bytes,
                                   enum ibv_atomic_cap atomic_cap);
void cuda_reg_md_close(uct_syncmem_md_t *md);

static inline void *cuda_reg_ptr(CUdeviceptr dptr)
{
    return (void*)(uintptr_t)dptr;
}

static inline uint32_t cuda_reg_lkey(const uct_syncmem_mem_t *memh)
{
    return memh->mr->lkey;
}


/* Every access the fake MDs' regions must grant (with atomics if the MD
 * has them). */
#define CUDA_REG_ACCESS_ALL (IBV_ACCESS_LOCAL_WRITE | \
                             IBV_ACCESS_REMOTE_WRITE | \
                             IBV_ACCESS_REMOTE_READ)
#define CUDA_REG_NO_LIMIT   SIZE_MAX    /* a cache bound */

/* uct_syncmem_cuda_reg, for the errors a case asks for: no log. */
ucs_status_t cuda_reg_try(uct_syncmem_md_t *md, CUdeviceptr ptr,
                          size_t length, uct_syncmem_mem_t **memh_p);
/* Registers ptr+length: 1 if it worked, and the MR covers the buffer;
 * else the case fails. */
int cuda_reg_reg(uct_syncmem_md_t *md, CUdeviceptr ptr, size_t length,
                 uct_syncmem_mem_t **memh_p);
/* The MR of memh is exactly [start, start + size): 1, or the case fails
 * saying what. */
int cuda_reg_mr_is(const uct_syncmem_mem_t *memh, CUdeviceptr start,
                   size_t size, const char *what);
/* These two do nothing on NULL or 0, and then set it. */
void cuda_reg_dereg(uct_syncmem_md_t *md, uct_syncmem_mem_t **memh_p);
void cuda_reg_free(CUdeviceptr *dptr);


/*
 * The cases that run once the program has the driver, in this order:
 * cuda_reg_memory.c's (cuMemAlloc memory only, so that the SYNC_MEMOPS
 * case of cuda_reg_vmm.c, first there, finds no context flag set yet),
 * cuda_reg_vmm.c's, then cuda_reg_cache.c's. Each list ends with a NULL
 * name.
 */
typedef struct cuda_reg_case {
    const char *name;
    void       (*run)(void);
} cuda_reg_case_t;

extern const cuda_reg_case_t cuda_reg_memory_cases[];
extern const cuda_reg_case_t cuda_reg_vmm_cases[];
extern const cuda_reg_case_t cuda_reg_cache_cases[];

#endif
