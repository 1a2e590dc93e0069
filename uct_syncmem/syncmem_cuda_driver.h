/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - the CUDA driver as the CUDA registration cache (syncmem_cuda.c)
 * sees it: whether the process uses it, what it says of an address, and
 * the calls around a registration. syncmem_cuda_driver.c loads it.
 */
#ifndef UCT_SYNCMEM_CUDA_DRIVER_H_
#define UCT_SYNCMEM_CUDA_DRIVER_H_

#include <ucs/debug/log.h>   /* first: UCX's config.h */
#include "syncmem_cuda.h"
#include "syncmem_cuda_extent.h"

#include <ucs/sys/topo/base/topo.h>


/* What the driver says of an address in CUDA device memory. */
typedef struct uct_syncmem_cuda_buf {
    uint64_t  buffer_id;    /* of the piece mapped there; 0 if none is */
    uintptr_t range_start;  /* the allocation, or the VMM reservation */
    size_t    range_size;
    void      *ctx;         /* NULL for VMM and pool memory */
    int       ordinal;      /* its GPU; -1 if the driver did not say */
    int       allocation;   /* cuMemAlloc memory: its range is its piece */
    int       mapped;       /* 0: reserved VA that nothing is mapped at */
} uct_syncmem_cuda_buf_t;

/* Where [address, address + length) lies, once the driver knows it is
 * CUDA memory: the pieces that hold it and what to register. */
typedef struct uct_syncmem_cuda_extent {
    uct_syncmem_cuda_span_t  span;
    unsigned                 num_pieces;
    uct_syncmem_cuda_piece_t pieces[UCT_SYNCMEM_CUDA_MAX_PIECES];
} uct_syncmem_cuda_extent_t;


/* Why the driver is not in use ("" while the process has not loaded and
 * initialised it). */
const char *uct_syncmem_cuda_why(void);

/* Whether a GPU here exports dma-bufs and the driver has the call
 * (cuMemGetHandleForAddressRange, CUDA 11.7). */
int uct_syncmem_cuda_exports(void);

/* 0 if address is not CUDA device memory, nor reserved for it (host,
 * managed and pinned host memory, or the driver not in use). */
int uct_syncmem_cuda_query(const void *address, uct_syncmem_cuda_buf_t *buf);

/* The extent of [address, address + length) in buf (from
 * uct_syncmem_cuda_query at address), as uct_syncmem_cuda_extent() rules,
 * with the pieces asked of the driver; a refusal is logged at level with
 * what to do. */
ucs_status_t uct_syncmem_cuda_locate(uintptr_t address, size_t length,
                                     const uct_syncmem_cuda_buf_t *buf,
                                     ucs_log_level_t level,
                                     uct_syncmem_cuda_extent_t *extent);

/* Whether each piece still has the start, size and buffer id it had:
 * unmapped, freed or mapped again, it has not. */
int uct_syncmem_cuda_pieces_alive(const uct_syncmem_cuda_piece_t *pieces,
                                  unsigned num);

/*
 * Before the HCA may read the memory: SYNC_MEMOPS on buf (see
 * syncmem_cuda_driver.c), and with dmabuf, its dma-buf (*fd; -1 without).
 * With the buffer's context current for the call.
 */
ucs_status_t uct_syncmem_cuda_prepare(const uct_syncmem_cuda_buf_t *buf,
                                      const uct_syncmem_cuda_span_t *span,
                                      int dmabuf, ucs_log_level_t level,
                                      int *fd);

/* The PCI function of GPU ordinal, as UCS's topology knows it. */
ucs_sys_device_t uct_syncmem_cuda_sys_dev(int ordinal);

#endif
