/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - UCT transport over ibverbs: what every file shares.
 *
 * Objects: one component ("syncmem"), one memory domain per verbs device
 * (named after it, e.g. "rxe0"), one transport ("syncmem") with one UCT
 * device per active port (e.g. "rxe0:1"). One header per object, each
 * below the ones that use it:
 *   syncmem_md.h         memory domain, registrations, CUDA, the device
 *   syncmem_qp.h         QPs and work completions (verbs calls, no state)
 *   syncmem_replay.h     an endpoint's replay ring and lost atomics
 *   syncmem_reconnect.h  an endpoint's reconnect, its events in
 *   syncmem_cm.h         the connection handshake
 *   syncmem_iface.h      interface: CQs, receive queue, pools, config
 *   syncmem_ep.h         endpoint, its operations, the doorbell
 *   syncmem_hooks.h      what only tests and tools call
 * contrib/tools/layers.py (make check) keeps the files' calls in layers.
 */
#ifndef UCT_SYNCMEM_H_
#define UCT_SYNCMEM_H_

#include "compat.h"

#include <uct/base/uct_md.h>
#include <uct/base/uct_iface.h>
#include <ucs/sys/string.h>
#include <ucs/datastruct/khash.h>
#include <ucs/type/spinlock.h>
#include <infiniband/verbs.h>

#define UCT_SYNCMEM_NAME         "syncmem"
#define UCT_SYNCMEM_CONFIG_PREFIX "SYNCMEM_"

typedef struct uct_syncmem_md    uct_syncmem_md_t;
typedef struct uct_syncmem_iface uct_syncmem_iface_t;
typedef struct uct_syncmem_ep    uct_syncmem_ep_t;
typedef struct uct_syncmem_op    uct_syncmem_op_t;

/* What a peer needs to know about one of our ports; see syncmem_addr.c. */
typedef struct uct_syncmem_port {
    uint8_t       num;         /* port number, 1-based */
    uint8_t       link_layer;  /* IBV_LINK_LAYER_INFINIBAND or _ETHERNET */
    uint8_t       gid_index;   /* local GID table index used for traffic */
    uint8_t       mtu;         /* enum ibv_mtu: active MTU, capped by config */
    uint16_t      lid;         /* InfiniBand only */
    uint8_t       active_speed;
    uint8_t       active_width;
    union ibv_gid gid;
    /* Our own port's QoS settings (UCX_SYNCMEM_PKEY, _SL, _TRAFFIC_CLASS),
     * applied to its QPs and address handles; not part of the address, so
     * zero in a peer's unpacked port. */
    uint16_t      pkey_index;  /* P_Key table index of the QPs */
    uint16_t      pkey;        /* the table's value there, for messages */
    uint8_t       sl;
    uint8_t       traffic_class;
} uct_syncmem_port_t;

enum {
    UCT_SYNCMEM_DIR_TX,
    UCT_SYNCMEM_DIR_RX
};

#define UCT_SYNCMEM_PSN_MASK  0xffffffu /* PSNs are 24 bits */

extern uct_component_t uct_syncmem_component;

#endif
