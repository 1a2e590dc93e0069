// SPDX-License-Identifier: BSD-3-Clause
// CRC32C of the consistency check (uct_syncmem/syncmem_verify.c): known
// values, chaining, and the SSE4.2 path against the table-driven one.
#include <gtest/gtest.h>

extern "C" {
#include <uct_syncmem/syncmem_ep.h>
#include <uct_syncmem/syncmem_qp.h>
#include <uct_syncmem/syncmem_hooks.h>
}

#include <cstring>
#include <random>
#include <vector>

TEST(crc32c, known_values)
{
    const char *check = "123456789";

    EXPECT_EQ(0xe3069283u, uct_syncmem_crc32c(0, check, strlen(check)));
    EXPECT_EQ(0xe3069283u, uct_syncmem_crc32c_sw(0, check, strlen(check)));
    EXPECT_EQ(0u, uct_syncmem_crc32c(0, "", 0));

    // RFC 3720 (iSCSI), B.4: 32 bytes of zeros, of ones, ascending
    std::vector<uint8_t> buf(32, 0);
    EXPECT_EQ(0x8a9136aau, uct_syncmem_crc32c(0, buf.data(), buf.size()));
    std::fill(buf.begin(), buf.end(), 0xff);
    EXPECT_EQ(0x62a8ab43u, uct_syncmem_crc32c(0, buf.data(), buf.size()));
    for (size_t i = 0; i < buf.size(); ++i) {
        buf[i] = i;
    }
    EXPECT_EQ(0x46dd794eu, uct_syncmem_crc32c(0, buf.data(), buf.size()));
    EXPECT_EQ(0x46dd794eu, uct_syncmem_crc32c_sw(0, buf.data(), buf.size()));
}

// Whatever path the CPU takes, every length and alignment gives the
// table's value, and CRCs chain over split buffers.
TEST(crc32c, paths_agree_and_chain)
{
    std::mt19937 rng(42);
    std::vector<uint8_t> buf(4096 + 16);
    for (auto &b : buf) {
        b = rng();
    }

    for (size_t offset = 0; offset < 8; ++offset) {
        for (size_t len : {0, 1, 3, 7, 8, 9, 15, 16, 63, 100, 1000, 4096}) {
            const uint8_t *p = buf.data() + offset;
            uint32_t whole   = uct_syncmem_crc32c_sw(0, p, len);
            ASSERT_EQ(whole, uct_syncmem_crc32c(0, p, len)) << offset << " "
                                                            << len;
            for (size_t split : {(size_t)0, len / 3, len}) {
                uint32_t crc = uct_syncmem_crc32c(0, p, split);
                ASSERT_EQ(whole, uct_syncmem_crc32c(crc, p + split,
                                                    len - split));
            }
        }
    }
}

// One flipped bit anywhere changes the CRC (what VERIFY=crc relies on).
TEST(crc32c, detects_one_flipped_bit)
{
    std::vector<uint8_t> buf(1500, 0x5a);
    uint32_t good = uct_syncmem_crc32c(0, buf.data(), buf.size());

    for (size_t i = 0; i < buf.size(); i += 7) {
        buf[i] ^= 1u << (i % 8);
        ASSERT_NE(good, uct_syncmem_crc32c(0, buf.data(), buf.size())) << i;
        buf[i] ^= 1u << (i % 8);
    }
}
