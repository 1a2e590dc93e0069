/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - the part of the CUDA driver API that syncmem_cuda_driver.c
 * calls.
 *
 * The driver is loaded with dlopen() at run time, so the module builds and
 * loads without CUDA; these are the ABI values it needs, from NVIDIA's
 * documentation of cuda.h (test/uct_syncmem/test_cuda.cc compares them with
 * cuda.h where that is installed).
 */
#ifndef UCT_SYNCMEM_CUDA_H_
#define UCT_SYNCMEM_CUDA_H_

#include <stddef.h>
#include <stdint.h>

typedef int                uct_syncmem_cu_result_t;  /* CUresult */
typedef unsigned long long uct_syncmem_cu_ptr_t;     /* CUdeviceptr */
typedef int                uct_syncmem_cu_device_t;  /* CUdevice */
typedef void               *uct_syncmem_cu_context_t; /* CUcontext */

#define UCT_SYNCMEM_CU_SUCCESS                          0
#define UCT_SYNCMEM_CU_ERROR_NOT_INITIALIZED            3
#define UCT_SYNCMEM_CU_ERROR_NOT_FOUND                  500
#define UCT_SYNCMEM_CU_ERROR_NOT_SUPPORTED              801
#define UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_CONTEXT        1
#define UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_MEMORY_TYPE    2
#define UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_SYNC_MEMOPS    6
#define UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_BUFFER_ID      7
#define UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_IS_MANAGED     8
#define UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_IS_LEGACY_IPC  10
#define UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_RANGE_START    11
#define UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_RANGE_SIZE     12
#define UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_MAPPED         13
#define UCT_SYNCMEM_CU_MEMORYTYPE_HOST                  1
#define UCT_SYNCMEM_CU_MEMORYTYPE_DEVICE                2
#define UCT_SYNCMEM_CU_CTX_SYNC_MEMOPS                  0x80
#define UCT_SYNCMEM_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD 1
#define UCT_SYNCMEM_CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED 124

#endif
