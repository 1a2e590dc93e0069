/*
 * syncmem - the part of the CUDA driver API that syncmem_cuda.c calls.
 *
 * The driver is loaded with dlopen() at run time, so the module builds and
 * loads without CUDA; these are the ABI values it needs, from NVIDIA's
 * documentation of cuda.h (test/uct_syncmem/test_cuda.cc compares them with
 * cuda.h where that is installed).
 */
#ifndef UCT_SYNCMEM_CUDA_H_
#define UCT_SYNCMEM_CUDA_H_

typedef int                uct_syncmem_cu_result_t;  /* CUresult */
typedef unsigned long long uct_syncmem_cu_ptr_t;     /* CUdeviceptr */
typedef int                uct_syncmem_cu_device_t;  /* CUdevice */

#define UCT_SYNCMEM_CU_SUCCESS                          0
#define UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_MEMORY_TYPE    2
#define UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_BUFFER_ID      7
#define UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_IS_MANAGED     8
#define UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_RANGE_START    11
#define UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_RANGE_SIZE     12
#define UCT_SYNCMEM_CU_MEMORYTYPE_DEVICE                2
#define UCT_SYNCMEM_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD 1
#define UCT_SYNCMEM_CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED 124

#endif
