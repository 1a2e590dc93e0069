// SPDX-License-Identifier: BSD-3-Clause
// syncmem_cuda.h copies the few CUDA driver API values the module uses, so
// that it builds and loads without CUDA; where cuda.h is installed, they
// must match it.
#include <gtest/gtest.h>

#include <cuda.h>

extern "C" {
#include "uct_syncmem/syncmem_cuda.h"
}

#define SYNCMEM_CU_NAME(_f)  SYNCMEM_CU_NAME_(_f)
#define SYNCMEM_CU_NAME_(_f) #_f

TEST(cuda, driver_api_values_match_cuda_h)
{
    EXPECT_EQ(CUDA_SUCCESS, UCT_SYNCMEM_CU_SUCCESS);
    EXPECT_EQ(CUDA_ERROR_NOT_INITIALIZED, UCT_SYNCMEM_CU_ERROR_NOT_INITIALIZED);
    EXPECT_EQ(CUDA_ERROR_NOT_FOUND, UCT_SYNCMEM_CU_ERROR_NOT_FOUND);
    EXPECT_EQ(CUDA_ERROR_NOT_SUPPORTED, UCT_SYNCMEM_CU_ERROR_NOT_SUPPORTED);
    EXPECT_EQ(CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
              UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_IS_LEGACY_IPC);
    EXPECT_EQ(CU_POINTER_ATTRIBUTE_MAPPED,
              UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_MAPPED);
    EXPECT_EQ(CU_MEMORYTYPE_HOST, UCT_SYNCMEM_CU_MEMORYTYPE_HOST);
    EXPECT_EQ(CU_CTX_SYNC_MEMOPS, UCT_SYNCMEM_CU_CTX_SYNC_MEMOPS);
    EXPECT_EQ(CU_POINTER_ATTRIBUTE_CONTEXT,
              UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_CONTEXT);
    EXPECT_EQ(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
              UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL);
    EXPECT_EQ(CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
              UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_MEMORY_TYPE);
    EXPECT_EQ(CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
              UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_SYNC_MEMOPS);
    EXPECT_EQ(CU_POINTER_ATTRIBUTE_BUFFER_ID,
              UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_BUFFER_ID);
    EXPECT_EQ(CU_POINTER_ATTRIBUTE_IS_MANAGED,
              UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_IS_MANAGED);
    EXPECT_EQ(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
              UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_RANGE_START);
    EXPECT_EQ(CU_POINTER_ATTRIBUTE_RANGE_SIZE,
              UCT_SYNCMEM_CU_POINTER_ATTRIBUTE_RANGE_SIZE);
    EXPECT_EQ(CU_MEMORYTYPE_DEVICE, UCT_SYNCMEM_CU_MEMORYTYPE_DEVICE);
    EXPECT_EQ(CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
              UCT_SYNCMEM_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD);
    EXPECT_EQ(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED,
              UCT_SYNCMEM_CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED);
    EXPECT_EQ(sizeof(CUdeviceptr), sizeof(uct_syncmem_cu_ptr_t));
    EXPECT_EQ(sizeof(CUresult), sizeof(uct_syncmem_cu_result_t));
    EXPECT_EQ(sizeof(CUdevice), sizeof(uct_syncmem_cu_device_t));
    EXPECT_EQ(sizeof(CUcontext), sizeof(uct_syncmem_cu_context_t));
}

// syncmem_cuda_driver.c looks the driver's functions up by name; cuda.h maps some
// names to versioned ones, and those are what the driver exports.
TEST(cuda, symbol_names_are_the_ones_cuda_h_calls)
{
    EXPECT_STREQ("cuCtxPushCurrent_v2", SYNCMEM_CU_NAME(cuCtxPushCurrent));
    EXPECT_STREQ("cuCtxPopCurrent_v2", SYNCMEM_CU_NAME(cuCtxPopCurrent));
    EXPECT_STREQ("cuDevicePrimaryCtxRelease_v2",
                 SYNCMEM_CU_NAME(cuDevicePrimaryCtxRelease));
    EXPECT_STREQ("cuDevicePrimaryCtxRetain",
                 SYNCMEM_CU_NAME(cuDevicePrimaryCtxRetain));
    EXPECT_STREQ("cuPointerGetAttributes",
                 SYNCMEM_CU_NAME(cuPointerGetAttributes));
    EXPECT_STREQ("cuPointerSetAttribute",
                 SYNCMEM_CU_NAME(cuPointerSetAttribute));
    EXPECT_STREQ("cuDeviceGetPCIBusId", SYNCMEM_CU_NAME(cuDeviceGetPCIBusId));
    EXPECT_STREQ("cuMemGetHandleForAddressRange",
                 SYNCMEM_CU_NAME(cuMemGetHandleForAddressRange));
    EXPECT_STREQ("cuMemGetAddressRange_v2",
                 SYNCMEM_CU_NAME(cuMemGetAddressRange));
    EXPECT_STREQ("cuCtxGetCurrent", SYNCMEM_CU_NAME(cuCtxGetCurrent));
    EXPECT_STREQ("cuCtxGetFlags", SYNCMEM_CU_NAME(cuCtxGetFlags));
    EXPECT_STREQ("cuCtxSetFlags", SYNCMEM_CU_NAME(cuCtxSetFlags));
}
