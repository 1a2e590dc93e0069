/* SPDX-License-Identifier: BSD-3-Clause */
/* Sizes of the UCX structs syncmem embeds or fills, as compiled here. */
#ifndef SYNCMEM_TEST_ABI_SIZES_H_
#define SYNCMEM_TEST_ABI_SIZES_H_

#include <stddef.h>

typedef struct {
    const char *name;
    size_t     size;
} syncmem_abi_size_t;

#ifdef __cplusplus
extern "C" {
#endif
extern const syncmem_abi_size_t syncmem_abi_sizes[];
#ifdef __cplusplus
}
#endif

#endif
