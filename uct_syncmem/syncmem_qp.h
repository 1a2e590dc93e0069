/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - RC QPs and address handles: created, connected, resumed, moved
 * to error, queried; what a failed work completion means. Verbs calls
 * only: the state they change belongs to the caller (syncmem_qp.c). And
 * the iface's tables keyed by QP number or by peer port, whose (khash)
 * functions every layer that meets a QP calls: so they sit here, low.
 */
#ifndef UCT_SYNCMEM_QP_H_
#define UCT_SYNCMEM_QP_H_

#include "syncmem.h"

#include <string.h>

/* Send completions name their QP; this finds the endpoint behind it. */
KHASH_MAP_INIT_INT(uct_syncmem_qp_eps, uct_syncmem_ep_t*)

/* Receive side of reconnect: the last AM request number seen per QP, and
 * for a QP that replaced another, the one it replaced (syncmem_rx_dedup.c). */
KHASH_MAP_INIT_INT(uct_syncmem_qp_sn, uint16_t)
KHASH_MAP_INIT_INT(uct_syncmem_qp_link, uint64_t)

/* The address handles of an iface's handshake messages, one per peer port
 * (syncmem_qp.c): every connection to one host shares it. */
typedef struct uct_syncmem_ah_key {
    union ibv_gid gid;
    uint16_t      lid;
} uct_syncmem_ah_key_t;

static inline khint32_t uct_syncmem_ah_key_hash(uct_syncmem_ah_key_t key)
{
    return kh_int64_hash_func(key.gid.global.subnet_prefix ^
                              key.gid.global.interface_id ^ key.lid);
}

static inline int uct_syncmem_ah_key_equal(uct_syncmem_ah_key_t a,
                                           uct_syncmem_ah_key_t b)
{
    return (a.lid == b.lid) && !memcmp(&a.gid, &b.gid, sizeof(a.gid));
}

KHASH_INIT(uct_syncmem_ahs, uct_syncmem_ah_key_t, struct ibv_ah*, 1,
           uct_syncmem_ah_key_hash, uct_syncmem_ah_key_equal)

void uct_syncmem_qp_init_attr(uct_syncmem_iface_t *iface,
                              struct ibv_qp_init_attr *init);
ucs_status_t uct_syncmem_qp_create(uct_syncmem_iface_t *iface,
                                   struct ibv_cq *send_cq,
                                   struct ibv_qp **qp_p);
/* To RTS, connected to dest_qpn, with the RC timeout 4.096us * 2^timeout_exp
 * (uct_syncmem_ep_rc_timeout; passive QPs: the iface's) */
ucs_status_t uct_syncmem_qp_connect(uct_syncmem_iface_t *iface,
                                    struct ibv_qp *qp,
                                    const uct_syncmem_port_t *peer,
                                    uint32_t dest_qpn, uint8_t timeout_exp);
int uct_syncmem_qp_set_timeout(struct ibv_qp *qp, uint8_t timeout_exp);
/* Testing (uct_syncmem_iface_inject_refusal): qp's peer may no longer
 * write to it, and gets IBV_WC_REM_INV_REQ_ERR for a write. */
ucs_status_t uct_syncmem_qp_refuse_writes(struct ibv_qp *qp);
ucs_status_t uct_syncmem_qp_resume(uct_syncmem_iface_t *iface,
                                   struct ibv_qp *qp,
                                   const uct_syncmem_port_t *peer,
                                   uint32_t dest_qpn, uint32_t sq_psn,
                                   uint32_t rq_psn, uint8_t timeout_exp);
ucs_status_t uct_syncmem_qp_reinit(uct_syncmem_iface_t *iface,
                                   struct ibv_qp *qp);
enum ibv_qp_state uct_syncmem_qp_query(struct ibv_qp *qp, uint32_t *rq_psn_p);
/* Moves qp to the error state, then reset, and gives the PSN its responder
 * expected next when it stopped: what ran on it is final. */
#define UCT_SYNCMEM_QP_STOP_SLACK 0x1000u /* PSNs a request may still take */
ucs_status_t uct_syncmem_qp_stop(struct ibv_qp *qp, uint32_t *rq_psn_p);
enum ibv_mtu uct_syncmem_qp_path_mtu(uct_syncmem_iface_t *iface,
                                     const uct_syncmem_port_t *peer);
/* The iface's address handle to peer's port, made the first time (NULL,
 * logged, if it cannot be: retried with the next message); _find never
 * makes one. All go with the iface (uct_syncmem_ahs_cleanup), after its
 * CM QP. */
struct ibv_ah *uct_syncmem_ah_get(uct_syncmem_iface_t *iface,
                                  const uct_syncmem_port_t *peer);
struct ibv_ah *uct_syncmem_ah_find(uct_syncmem_iface_t *iface,
                                   const uct_syncmem_port_t *peer);
void uct_syncmem_ahs_cleanup(uct_syncmem_iface_t *iface);
ucs_status_t uct_syncmem_wc_status(enum ibv_wc_status status);
/* What to check when a work completion has this status (one line, naming
 * the UCX_SYNCMEM_* setting where one helps); never NULL */
const char *uct_syncmem_wc_advice(enum ibv_wc_status status);
/* Logs a failed send completion of ep at the iface's failure level */
void uct_syncmem_wc_log(uct_syncmem_iface_t *iface, uct_syncmem_ep_t *ep,
                        const struct ibv_wc *wc, const char *req);

#endif
