/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Remote keys from peers, through UCT's own entry point (uct_rkey_unpack
 * into the syncmem component, syncmem_md.c). The key buffer is exactly the
 * packed size UCP reserves for it: an error, or the rkey it carries.
 */
#include "fuzz.h"

#include <ucs/algorithm/crc.h>
#include <stddef.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in = {data, size};
    uct_syncmem_packed_rkey_t *packed;
    uct_rkey_bundle_t bundle;
    uint32_t rkey;

    packed = malloc(sizeof(*packed));
    fuzz_bytes(&in, packed, sizeof(*packed));
    if (fuzz_u8(&in) & 1) {
        /* a CRC that matches, so that the checks behind it are reached */
        packed->crc = ucs_crc16(packed, offsetof(uct_syncmem_packed_rkey_t,
                                                 crc));
    }
    if (uct_rkey_unpack(&uct_syncmem_component, packed, &bundle) == UCS_OK) {
        memcpy(&rkey, (uint8_t*)packed + 1, sizeof(rkey));
        FUZZ_CHECK(packed->magic == UCT_SYNCMEM_RKEY_MAGIC);
        FUZZ_CHECK(bundle.rkey == rkey);
        uct_rkey_release(&uct_syncmem_component, &bundle);
    }
    free(packed);
    return 0;
}
