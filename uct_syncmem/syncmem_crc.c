/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - CRC32C (Castagnoli), for the consistency check's trailers and
 * read-backs: slicing-by-8 tables, or the SSE4.2 instruction where the CPU
 * has it (checked at run time: the module is built for any x86-64).
 */
#include "syncmem_iface.h"
#include "syncmem_hooks.h"

#include <string.h>
#if defined(__x86_64__)
#  include <nmmintrin.h>
#endif

#define UCT_SYNCMEM_CRC32C_POLY 0x82f63b78u  /* reflected Castagnoli */

static uint32_t uct_syncmem_crc32c_table[8][256];
static uint32_t (*uct_syncmem_crc32c_func)(uint32_t, const uint8_t*, size_t);

uint32_t uct_syncmem_crc32c_sw(uint32_t crc, const void *buf, size_t length)
{
    const uint8_t *p = buf;
    uint32_t c       = ~crc;
    uint64_t word;

    while (length >= 8) {
        memcpy(&word, p, sizeof(word));
        word ^= c; /* little-endian: the low 4 bytes meet the CRC */
        c = uct_syncmem_crc32c_table[7][word & 0xff] ^
            uct_syncmem_crc32c_table[6][(word >> 8) & 0xff] ^
            uct_syncmem_crc32c_table[5][(word >> 16) & 0xff] ^
            uct_syncmem_crc32c_table[4][(word >> 24) & 0xff] ^
            uct_syncmem_crc32c_table[3][(word >> 32) & 0xff] ^
            uct_syncmem_crc32c_table[2][(word >> 40) & 0xff] ^
            uct_syncmem_crc32c_table[1][(word >> 48) & 0xff] ^
            uct_syncmem_crc32c_table[0][word >> 56];
        p      += 8;
        length -= 8;
    }
    while (length-- > 0) {
        c = uct_syncmem_crc32c_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    }
    return ~c;
}

static uint32_t uct_syncmem_crc32c_sw_func(uint32_t crc, const uint8_t *p,
                                           size_t length)
{
    return uct_syncmem_crc32c_sw(crc, p, length);
}

#if defined(__x86_64__)
static __attribute__((target("sse4.2"))) uint32_t
uct_syncmem_crc32c_sse42(uint32_t crc, const uint8_t *p, size_t length)
{
    uint64_t c = ~crc, word;

    while (length >= 8) {
        memcpy(&word, p, sizeof(word));
        c       = _mm_crc32_u64(c, word);
        p      += 8;
        length -= 8;
    }
    while (length-- > 0) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
    }
    return ~(uint32_t)c;
}
#endif

static void UCS_F_CTOR uct_syncmem_crc32c_init(void)
{
    uint32_t c;
    unsigned i, k;

    for (i = 0; i < 256; ++i) {
        c = i;
        for (k = 0; k < 8; ++k) {
            c = (c >> 1) ^ ((c & 1) ? UCT_SYNCMEM_CRC32C_POLY : 0);
        }
        uct_syncmem_crc32c_table[0][i] = c;
    }
    for (i = 0; i < 256; ++i) {
        for (k = 1; k < 8; ++k) {
            c = uct_syncmem_crc32c_table[k - 1][i];
            uct_syncmem_crc32c_table[k][i] = (c >> 8) ^
                    uct_syncmem_crc32c_table[0][c & 0xff];
        }
    }

    uct_syncmem_crc32c_func = uct_syncmem_crc32c_sw_func;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) {
        uct_syncmem_crc32c_func = uct_syncmem_crc32c_sse42;
    }
#endif
}

uint32_t uct_syncmem_crc32c(uint32_t crc, const void *buf, size_t length)
{
    return uct_syncmem_crc32c_func(crc, buf, length);
}
