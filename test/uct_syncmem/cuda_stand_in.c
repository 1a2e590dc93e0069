/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A stand-in for the CUDA driver (built as libcuda.so.1, loaded by path by
 * test_cuda_load.cc only): a driver with no GPU that counts cuInit(), so
 * that a host test can see when syncmem_cuda.c starts using the driver.
 * It models what the CUDA documentation says of initialisation: before
 * cuInit() the calls answer CUDA_ERROR_NOT_INITIALIZED; and the child of a
 * fork() after cuInit() cannot initialise the driver. It says nothing else
 * about real CUDA; test/gpu/cuda_reg.c runs the same code against the real
 * driver.
 */
#include <stddef.h>
#include <string.h>
#include <unistd.h>

typedef int CUresult;
#define CUDA_SUCCESS               0
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_NO_DEVICE       100

int syncmem_stand_in_inits;   /* cuInit() calls */
static pid_t stand_in_inited; /* the process that initialised it */

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
    *count = 0;
    return CUDA_SUCCESS;
}

/* Every pointer is host memory: attributes zeroed, as the driver does. */
CUresult cuPointerGetAttributes(unsigned num, int *attributes, void **data,
                                unsigned long long ptr)
{
    return stand_in_ready() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

#define SYNCMEM_STAND_IN_NO_DEVICE(_name, ...) \
    CUresult _name(__VA_ARGS__) { return CUDA_ERROR_NO_DEVICE; }

SYNCMEM_STAND_IN_NO_DEVICE(cuPointerSetAttribute, const void *v, int a,
                           unsigned long long p)
SYNCMEM_STAND_IN_NO_DEVICE(cuMemGetHandleForAddressRange, void *h,
                           unsigned long long p, size_t s, int t,
                           unsigned long long f)
SYNCMEM_STAND_IN_NO_DEVICE(cuDeviceGet, int *dev, int ordinal)
SYNCMEM_STAND_IN_NO_DEVICE(cuDeviceGetAttribute, int *v, int a, int dev)
SYNCMEM_STAND_IN_NO_DEVICE(cuDevicePrimaryCtxRetain, void **ctx, int dev)
SYNCMEM_STAND_IN_NO_DEVICE(cuDevicePrimaryCtxRelease_v2, int dev)
SYNCMEM_STAND_IN_NO_DEVICE(cuCtxPushCurrent_v2, void *ctx)
SYNCMEM_STAND_IN_NO_DEVICE(cuCtxPopCurrent_v2, void **ctx)
SYNCMEM_STAND_IN_NO_DEVICE(cuDeviceGetPCIBusId, char *id, int len, int dev)
