/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - the part of the CUDA driver API that syncmem_cuda.c calls, and
 * the arithmetic of a CUDA registration.
 *
 * The driver is loaded with dlopen() at run time, so the module builds and
 * loads without CUDA; these are the ABI values it needs, from NVIDIA's
 * documentation of cuda.h (test/uct_syncmem/test_cuda.cc compares them with
 * cuda.h where that is installed).
 */
#ifndef UCT_SYNCMEM_CUDA_H_
#define UCT_SYNCMEM_CUDA_H_

#include <ucs/type/status.h>
#include <stddef.h>
#include <stdint.h>

typedef int                uct_syncmem_cu_result_t;  /* CUresult */
typedef unsigned long long uct_syncmem_cu_ptr_t;     /* CUdeviceptr */
typedef int                uct_syncmem_cu_device_t;  /* CUdevice */
typedef void               *uct_syncmem_cu_context_t; /* CUcontext */

#define UCT_SYNCMEM_CU_SUCCESS                          0
#define UCT_SYNCMEM_CU_ERROR_NOT_INITIALIZED            3
#define UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_CONTEXT        1
#define UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_MEMORY_TYPE    2
#define UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_SYNC_MEMOPS    6
#define UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_BUFFER_ID      7
#define UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_IS_MANAGED     8
#define UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_RANGE_START    11
#define UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_RANGE_SIZE     12
#define UCT_SYNCMEM_CU_MEMORYTYPE_DEVICE                2
#define UCT_SYNCMEM_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD 1
#define UCT_SYNCMEM_CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED 124


/*
 * What one CUDA allocation is registered as. The driver exports dma-bufs of
 * whole pages only, while cuMemAlloc places small and odd-sized buffers at
 * 512-byte steps inside its chunks; so the export is the page-aligned range
 * around the allocation (which may cover its neighbours), and the MR is
 * just the allocation, at its own address, inside that dma-buf:
 *
 *   export_base               iova = alloc start
 *   |<-------- offset -------->|<--------- length --------->|
 *   |<----------------------- export_length ------------------------->|
 *
 * A peer's rkey then reaches the allocation's bytes and none of its
 * neighbours'.
 */
typedef struct uct_syncmem_cuda_span {
    uintptr_t export_base;    /* page-aligned: cuMemGetHandleForAddressRange */
    size_t    export_length;  /* whole pages */
    uint64_t  offset;         /* of the allocation in the dma-buf */
    uintptr_t iova;           /* the allocation's address: remote addresses */
    size_t    length;         /* the allocation's size */
} uct_syncmem_cuda_span_t;

/*
 * The span of the allocation [start, start + size) for a registration of
 * [address, address + length) in it. UCS_ERR_INVALID_PARAM if the buffer
 * does not lie inside the allocation (e.g. VMM memory mapped in several
 * chunks, each its own allocation), or a range wraps; page is a power of 2.
 */
static inline ucs_status_t
uct_syncmem_cuda_span(uintptr_t address, size_t length, uintptr_t start,
                      size_t size, size_t page, uct_syncmem_cuda_span_t *span)
{
    if ((length == 0) || (size == 0) || (address < start) ||
        (address + length < address) || (start + size < start) ||
        (start + size > UINTPTR_MAX - page) ||
        (address + length > start + size)) {
        return UCS_ERR_INVALID_PARAM;
    }

    span->export_base   = start & ~(uintptr_t)(page - 1);
    span->export_length = ((start + size + page - 1) &
                           ~(uintptr_t)(page - 1)) - span->export_base;
    span->offset        = start - span->export_base;
    span->iova          = start;
    span->length        = size;
    return UCS_OK;
}

#endif
