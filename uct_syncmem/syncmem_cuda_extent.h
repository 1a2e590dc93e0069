/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - the arithmetic of a CUDA registration: what is exported and
 * registered for a buffer, from what the driver says is mapped around it.
 * Pure (test/uct_syncmem/test_cuda_span.cc); below syncmem_cuda.c and
 * syncmem_cuda_driver.c, which both use it.
 */
#ifndef UCT_SYNCMEM_CUDA_EXTENT_H_
#define UCT_SYNCMEM_CUDA_EXTENT_H_

#include <ucs/type/status.h>
#include <stddef.h>
#include <stdint.h>


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


/*
 * One piece of mapped CUDA memory, as cuMemGetAddressRange() tells it: for
 * cuMemAlloc memory its allocation; for VMM memory what one cuMemMap()
 * mapped into a reservation; for pool memory the allocation. id is the
 * driver's buffer id there (CU_POINTER_ATTRIBUTE_BUFFER_ID), never given
 * to another allocation or mapping in the life of the process.
 */
typedef struct uct_syncmem_cuda_piece {
    uintptr_t start;
    size_t    size;
    uint64_t  id;
} uct_syncmem_cuda_piece_t;

/* A buffer across more pieces is refused (register it in parts). */
#define UCT_SYNCMEM_CUDA_MAX_PIECES 256

/*
 * The extent of a registration of [address, address + length): the mapped
 * pieces that hold it, which must lie side by side with no hole, all inside
 * the one allocation or reservation [range_start, range_start + range_size)
 * that CU_POINTER_ATTRIBUTE_RANGE_START_ADDR/RANGE_SIZE give at address
 * (cuMemGetHandleForAddressRange exports a range of one reservation whose
 * every page is mapped; cuMemAlloc memory is its own range, so a buffer
 * never reaches into another allocation). pieces[0..num) are those found
 * from address onwards, each starting where the last ended. The span is
 * then as uct_syncmem_cuda_span() makes it for the pieces as one
 * allocation. Errors:
 *   UCS_ERR_INVALID_PARAM  empty, wraps, not inside the range, or pieces
 *                          that do not follow each other or leave it
 *   UCS_ERR_INVALID_ADDR   a page of it is not mapped: *hole is the first
 *                          address with no piece
 *   UCS_ERR_EXCEEDS_LIMIT  more than UCT_SYNCMEM_CUDA_MAX_PIECES pieces
 */
static inline ucs_status_t
uct_syncmem_cuda_extent(uintptr_t address, size_t length,
                        uintptr_t range_start, size_t range_size,
                        const uct_syncmem_cuda_piece_t *pieces, unsigned num,
                        size_t page, uct_syncmem_cuda_span_t *span,
                        uintptr_t *hole)
{
    uintptr_t end = address + length;
    uintptr_t next;
    unsigned i;

    *hole = 0;
    if ((length == 0) || (end < address) || (range_size == 0) ||
        (range_start + range_size < range_start) || (address < range_start) ||
        (end > range_start + range_size)) {
        return UCS_ERR_INVALID_PARAM;
    }

    next = address;
    for (i = 0; (i < num) && (next < end); ++i) {
        if ((pieces[i].size == 0) ||
            (pieces[i].start + pieces[i].size < pieces[i].start) ||
            (pieces[i].start > next) ||
            (pieces[i].start + pieces[i].size <= next) ||
            ((i > 0) && (pieces[i].start != next)) ||
            (pieces[i].start < range_start) ||
            (pieces[i].start + pieces[i].size > range_start + range_size)) {
            return UCS_ERR_INVALID_PARAM;
        }
        next = pieces[i].start + pieces[i].size;
    }
    if (next < end) {
        if (num >= UCT_SYNCMEM_CUDA_MAX_PIECES) {
            return UCS_ERR_EXCEEDS_LIMIT;
        }
        *hole = next;
        return UCS_ERR_INVALID_ADDR;
    }

    return uct_syncmem_cuda_span(address, length, pieces[0].start,
                                 next - pieces[0].start, page, span);
}

#endif
