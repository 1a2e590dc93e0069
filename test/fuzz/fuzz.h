/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers shared by the fuzz targets (libFuzzer; contrib/harness/fuzz.sh builds
 * and runs them). Each target links the transport's real objects.
 */
#ifndef SYNCMEM_FUZZ_H_
#define SYNCMEM_FUZZ_H_

#include <uct_syncmem/syncmem_ep.h>
#include <uct_syncmem/syncmem_qp.h>
#include <uct_syncmem/syncmem_hooks.h>
#include <uct_syncmem/syncmem_addr.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The input, consumed front to back; past its end everything reads 0. */
typedef struct {
    const uint8_t *data;
    size_t        left;
} fuzz_in_t;

static inline void fuzz_bytes(fuzz_in_t *in, void *dst, size_t n)
{
    size_t k = (n < in->left) ? n : in->left;

    memcpy(dst, in->data, k);
    memset((uint8_t*)dst + k, 0, n - k);
    in->data += k;
    in->left -= k;
}

static inline uint8_t fuzz_u8(fuzz_in_t *in)
{
    uint8_t v;

    fuzz_bytes(in, &v, 1);
    return v;
}

static inline uint16_t fuzz_u16(fuzz_in_t *in)
{
    uint16_t v;

    fuzz_bytes(in, &v, 2);
    return v;
}

static inline uint32_t fuzz_u32(fuzz_in_t *in)
{
    uint32_t v;

    fuzz_bytes(in, &v, 4);
    return v;
}

/* A broken invariant is a finding: abort, so that libFuzzer keeps the input. */
#define FUZZ_CHECK(_cond) \
    do { \
        if (!(_cond)) { \
            fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, \
                    __LINE__, #_cond); \
            abort(); \
        } \
    } while (0)

/* A local RoCE (IPv4-mapped GID) or InfiniBand port, as an iface has. */
static inline void fuzz_local_port(uct_syncmem_port_t *port, int eth)
{
    static const uint8_t roce_gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff,
                                         0xff, 10, 0, 0, 1};
    static const uint8_t ib_gid[16]   = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 2,
                                         0xc9, 3, 0, 1, 2, 3};

    memset(port, 0, sizeof(*port));
    port->num        = 1;
    port->link_layer = eth ? IBV_LINK_LAYER_ETHERNET :
                             IBV_LINK_LAYER_INFINIBAND;
    port->mtu        = IBV_MTU_1024;
    port->lid        = eth ? 0 : 7;
    memcpy(port->gid.raw, eth ? roce_gid : ib_gid, 16);
}

#endif
