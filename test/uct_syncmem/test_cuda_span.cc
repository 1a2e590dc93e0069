// SPDX-License-Identifier: BSD-3-Clause
// What a CUDA allocation is registered as (uct_syncmem_cuda_span): the
// page-aligned export around it, the allocation itself inside that dma-buf.
// The placements are those cuMemAlloc gave on an H200 (driver 580, CUDA 13):
// small and odd-sized buffers at 512-byte steps inside a 2 MiB chunk.
#include <gtest/gtest.h>

#include <vector>

extern "C" {
#include "uct_syncmem/syncmem_cuda_extent.h"
}

namespace {

const size_t page       = 4096;
const uintptr_t chunk   = 0x7f0000000000ul;   // a 2 MiB-aligned chunk

// The properties every span must have, whatever the placement.
void check_span(uintptr_t start, size_t size,
                const uct_syncmem_cuda_span_t &span)
{
    SCOPED_TRACE(testing::Message() << std::hex << "alloc 0x" << start
                                    << "+" << std::dec << size);
    EXPECT_EQ(0u, span.export_base % page);
    EXPECT_EQ(0u, span.export_length % page);
    EXPECT_LE(span.export_base, start);
    EXPECT_GE(span.export_base + span.export_length, start + size);
    // not a page more than needed on either side
    EXPECT_LT(start - span.export_base, page);
    EXPECT_LT(span.export_base + span.export_length - (start + size), page);
    // the MR: the allocation at its own address, inside the dma-buf
    EXPECT_EQ(start, span.iova);
    EXPECT_EQ(size, span.length);
    EXPECT_EQ(start - span.export_base, span.offset);
    EXPECT_LE(span.offset + span.length, span.export_length);
    // ibv_reg_dmabuf_mr: iova and offset share their offset in the page
    EXPECT_EQ(span.iova % page, span.offset % page);
}

} // namespace

TEST(cuda_span, buffers_as_cuMemAlloc_places_them)
{
    struct {
        size_t   size;
        unsigned offsets[4];   // in the page, of four buffers in a row
    } seen[] = {
        {8,     {0, 512, 1024, 1536}},
        {100,   {0, 512, 1024, 1536}},
        {512,   {0, 512, 1024, 1536}},
        {3000,  {0, 3072, 2048, 1024}},
        {4097,  {0, 512, 1024, 1536}},
        {10000, {0, 2048, 0, 2048}},
    };

    for (const auto &s : seen) {
        for (unsigned i = 0; i < 4; ++i) {
            uintptr_t start = chunk + 16 * page * i + s.offsets[i];
            uct_syncmem_cuda_span_t span;

            ASSERT_EQ(UCS_OK, uct_syncmem_cuda_span(start, s.size, start,
                                                    s.size, page, &span));
            check_span(start, s.size, span);
        }
    }
}

TEST(cuda_span, exact_numbers)
{
    uct_syncmem_cuda_span_t span;

    // 3000 bytes at page offset 3072 run into the next page: two pages
    ASSERT_EQ(UCS_OK, uct_syncmem_cuda_span(chunk + 3072, 3000, chunk + 3072,
                                            3000, page, &span));
    EXPECT_EQ(chunk, span.export_base);
    EXPECT_EQ(2 * page, span.export_length);
    EXPECT_EQ(3072u, span.offset);

    // page-aligned, whole pages: the export is the allocation
    ASSERT_EQ(UCS_OK, uct_syncmem_cuda_span(chunk, 4 << 20, chunk, 4 << 20,
                                            page, &span));
    EXPECT_EQ(chunk, span.export_base);
    EXPECT_EQ(size_t(4 << 20), span.export_length);
    EXPECT_EQ(0u, span.offset);

    // one byte past a page: a second page
    ASSERT_EQ(UCS_OK, uct_syncmem_cuda_span(chunk + 512, 4097, chunk + 512,
                                            4097, page, &span));
    EXPECT_EQ(2 * page, span.export_length);
    EXPECT_EQ(512u, span.offset);
    EXPECT_EQ(4097u, span.length);
}

// An interior address registers its whole allocation: the span does not
// depend on which part of it was asked for.
TEST(cuda_span, interior_address_gives_the_allocation)
{
    uintptr_t start = chunk + 1024;
    size_t size     = 10000;
    uct_syncmem_cuda_span_t whole, part;

    ASSERT_EQ(UCS_OK, uct_syncmem_cuda_span(start, size, start, size, page,
                                            &whole));
    ASSERT_EQ(UCS_OK, uct_syncmem_cuda_span(start + 4000, 100, start, size,
                                            page, &part));
    EXPECT_EQ(whole.export_base, part.export_base);
    EXPECT_EQ(whole.export_length, part.export_length);
    EXPECT_EQ(whole.offset, part.offset);
    EXPECT_EQ(whole.iova, part.iova);
    EXPECT_EQ(whole.length, part.length);

    // the last byte is inside
    EXPECT_EQ(UCS_OK, uct_syncmem_cuda_span(start + size - 1, 1, start, size,
                                            page, &part));
}

// A buffer that does not lie inside its allocation is refused, before
// anything is exported: e.g. VMM memory mapped as two chunks.
TEST(cuda_span, refused_outside_the_allocation)
{
    const uintptr_t start = chunk + 512;
    const size_t size     = 2 << 20;
    uct_syncmem_cuda_span_t span;

    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_syncmem_cuda_span(start, size + 1, start, size, page,
                                    &span));                 // one past
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_syncmem_cuda_span(start + size - 8, 16, start, size, page,
                                    &span));                 // into the next
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_syncmem_cuda_span(start - 1, 8, start, size, page,
                                    &span));                 // before it
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_syncmem_cuda_span(start, 0, start, size, page,
                                    &span));                 // empty
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_syncmem_cuda_span(start, 8, start, 0, page,
                                    &span));                 // no allocation
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_syncmem_cuda_span(start + 8, SIZE_MAX, start, size, page,
                                    &span));                 // wraps
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_syncmem_cuda_span(UINTPTR_MAX - 100, 8, UINTPTR_MAX - 100,
                                    100, page, &span));      // page wraps
}

// The extent (uct_syncmem_cuda_extent): the mapped pieces that hold a
// buffer, inside its allocation or reservation. Pieces as a PyTorch
// expandable segment maps them: 2 MiB at a time into a large reservation.
namespace {

const size_t mib = 1 << 20;
const uintptr_t resv = 0x7e0000000000ul;     // a 1 GiB reservation
const size_t resv_size = 1ul << 30;

uct_syncmem_cuda_piece_t piece(size_t at, size_t size, uint64_t id)
{
    return {resv + at, size, id};
}

} // namespace

TEST(cuda_extent, a_buffer_inside_one_piece_is_that_piece)
{
    uct_syncmem_cuda_piece_t pieces[] = {piece(4 * mib, 2 * mib, 7)};
    uct_syncmem_cuda_span_t span;
    uintptr_t hole;

    ASSERT_EQ(UCS_OK, uct_syncmem_cuda_extent(resv + 5 * mib, 4096, resv,
                                              resv_size, pieces, 1, page,
                                              &span, &hole));
    EXPECT_EQ(resv + 4 * mib, span.export_base);
    EXPECT_EQ(2 * mib, span.export_length);
    EXPECT_EQ(resv + 4 * mib, span.iova);
    EXPECT_EQ(2 * mib, span.length);
    EXPECT_EQ(0u, span.offset);
    EXPECT_EQ(0u, hole);
}

TEST(cuda_extent, a_buffer_across_pieces_is_all_of_them)
{
    uct_syncmem_cuda_piece_t pieces[] = {piece(4 * mib, 2 * mib, 7),
                                         piece(6 * mib, 2 * mib, 9),
                                         piece(8 * mib, 20 * mib, 3)};
    uct_syncmem_cuda_span_t span;
    uintptr_t hole;

    // 16 bytes across the first boundary: the two pieces
    ASSERT_EQ(UCS_OK, uct_syncmem_cuda_extent(resv + 6 * mib - 8, 16, resv,
                                              resv_size, pieces, 2, page,
                                              &span, &hole));
    EXPECT_EQ(resv + 4 * mib, span.iova);
    EXPECT_EQ(4 * mib, span.length);
    EXPECT_EQ(span.iova, span.export_base);
    EXPECT_EQ(span.length, span.export_length);

    // the walk may find more than needed: only those up to the end count
    ASSERT_EQ(UCS_OK, uct_syncmem_cuda_extent(resv + 5 * mib, 4 * mib, resv,
                                              resv_size, pieces, 3, page,
                                              &span, &hole));
    EXPECT_EQ(resv + 4 * mib, span.iova);
    EXPECT_EQ(24 * mib, span.length);
}

TEST(cuda_extent, an_unmapped_hole_is_refused_where_it_is)
{
    uct_syncmem_cuda_piece_t pieces[] = {piece(4 * mib, 2 * mib, 7)};
    uct_syncmem_cuda_span_t span;
    uintptr_t hole;

    // the walk stopped at 6 MiB: nothing mapped there
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              uct_syncmem_cuda_extent(resv + 5 * mib, 2 * mib, resv,
                                      resv_size, pieces, 1, page, &span,
                                      &hole));
    EXPECT_EQ(resv + 6 * mib, hole);
    // nothing mapped at the buffer's start
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              uct_syncmem_cuda_extent(resv + 100 * mib, 8, resv, resv_size,
                                      pieces, 0, page, &span, &hole));
    EXPECT_EQ(resv + 100 * mib, hole);
}

TEST(cuda_extent, pieces_that_do_not_hold_the_buffer_are_refused)
{
    uct_syncmem_cuda_span_t span;
    uintptr_t hole;
    // a gap between them, the first not at the buffer, one outside the range
    uct_syncmem_cuda_piece_t gap[]   = {piece(4 * mib, 2 * mib, 7),
                                        piece(8 * mib, 2 * mib, 9)};
    uct_syncmem_cuda_piece_t after[] = {piece(6 * mib, 2 * mib, 7)};
    uct_syncmem_cuda_piece_t out[]   = {piece(resv_size - mib, 2 * mib, 7)};

    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_syncmem_cuda_extent(resv + 5 * mib, 4 * mib, resv,
                                      resv_size, gap, 2, page, &span, &hole));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_syncmem_cuda_extent(resv + 5 * mib, 8, resv, resv_size,
                                      after, 1, page, &span, &hole));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_syncmem_cuda_extent(resv + resv_size - 8, 4, resv,
                                      resv_size, out, 1, page, &span, &hole));
}

// A buffer never reaches out of its allocation or reservation: for
// cuMemAlloc memory the range is the allocation itself.
TEST(cuda_extent, a_buffer_out_of_its_range_is_refused)
{
    const uintptr_t alloc = chunk + 512;
    uct_syncmem_cuda_piece_t pieces[] = {{alloc, 3000, 1}};
    uct_syncmem_cuda_span_t span;
    uintptr_t hole;

    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_syncmem_cuda_extent(alloc + 2990, 16, alloc, 3000, pieces,
                                      1, page, &span, &hole));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_syncmem_cuda_extent(alloc, 0, alloc, 3000, pieces, 1, page,
                                      &span, &hole));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_syncmem_cuda_extent(alloc + 8, SIZE_MAX, alloc, 3000,
                                      pieces, 1, page, &span, &hole));
    // inside: the allocation, as uct_syncmem_cuda_span makes it
    ASSERT_EQ(UCS_OK, uct_syncmem_cuda_extent(alloc + 100, 8, alloc, 3000,
                                              pieces, 1, page, &span,
                                              &hole));
    check_span(alloc, 3000, span);
}

TEST(cuda_extent, more_pieces_than_the_limit_are_refused)
{
    std::vector<uct_syncmem_cuda_piece_t> pieces;
    uct_syncmem_cuda_span_t span;
    uintptr_t hole;

    for (unsigned i = 0; i < UCT_SYNCMEM_CUDA_MAX_PIECES; ++i) {
        pieces.push_back(piece(i * 2 * mib, 2 * mib, i + 1));
    }
    // all the pieces: registers
    EXPECT_EQ(UCS_OK, uct_syncmem_cuda_extent(
            resv, pieces.size() * 2 * mib, resv, resv_size, pieces.data(),
            pieces.size(), page, &span, &hole));
    // a byte more than they hold: the walk stopped at the limit
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, uct_syncmem_cuda_extent(
            resv, pieces.size() * 2 * mib + 1, resv, resv_size,
            pieces.data(), pieces.size(), page, &span, &hole));
}
