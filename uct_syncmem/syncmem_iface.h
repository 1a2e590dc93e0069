/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - the interface: one per port, with one send CQ for all its RC
 * QPs, one shared receive queue for their active messages (syncmem_am.c),
 * its endpoints, memory pools, handshake (syncmem_cm.h) and settings.
 */
#ifndef UCT_SYNCMEM_IFACE_H_
#define UCT_SYNCMEM_IFACE_H_

#include "syncmem_md.h"
#include "syncmem_qp.h"
#include "syncmem_cm.h"
#include "syncmem_rto.h"
#include "syncmem_amo_guess.h"

#define UCT_SYNCMEM_AM_MAX_HDR 128
#define UCT_SYNCMEM_CQ_SLACK   64  /* send CQ entries beyond TX_CQ_LEN */

/*
 * Immediate data of an active message, host order:
 *   | sn (16) | flags (8) | AM id (8) |
 * sn is the sending endpoint's request number: after a reconnect the
 * receiver drops a replayed message it already has (syncmem_reconnect.c).
 */
#define UCT_SYNCMEM_AM_IMM_ID_MASK   0xffu
#define UCT_SYNCMEM_AM_IMM_FLAG_CRC  UCS_BIT(8)  /* payload ends with CRC32C */
#define UCT_SYNCMEM_AM_IMM_SN_SHIFT  16

/* UCX_SYNCMEM_VERIFY: consistency checks; see syncmem_verify.c */
enum {
    UCT_SYNCMEM_VERIFY_NONE,
    UCT_SYNCMEM_VERIFY_CRC,
    UCT_SYNCMEM_VERIFY_LAST
};

#define UCT_SYNCMEM_CRC_LEN 4  /* the CRC32C trailer of an active message */

/* What the consistency check did, since the iface was opened. */
typedef struct uct_syncmem_verify_counters {
    uint64_t am_checked;   /* messages received with a CRC trailer */
    uint64_t am_dropped;   /* of those, dropped: the CRC did not match */
    uint64_t put_checked;  /* puts read back and compared */
    uint64_t put_failed;   /* of those, not what was written */
} uct_syncmem_verify_counters_t;

/* What the emulated atomics did, since the iface was opened. */
typedef struct uct_syncmem_amo_counters {
    uint64_t emulated;     /* operations emulated by compare-and-swap */
    uint64_t steps;        /* compare-and-swaps they posted */
    uint64_t guessed;      /* of their first steps, those that guessed
                              from the table (not 0) */
} uct_syncmem_amo_counters_t;

/* RC_TIMEOUT and RC_RETRY_COUNT: a table of their own, embedded without a
 * prefix, so that UCX's parser reads them as UCX reads its rc transports':
 * UCX_RC_TIMEOUT, then UCX_SYNCMEM_RC_TIMEOUT over it
 * (uct_syncmem_rc_config_table). */
typedef struct uct_syncmem_rc_config {
    ucs_time_t         timeout;       /* RC ack timeout; UCS_TIME_AUTO:
                                         measured (syncmem_rto.h) */
    unsigned           retry_count;
} uct_syncmem_rc_config_t;

typedef struct uct_syncmem_iface_config {
    uct_iface_config_t super;
    unsigned           rx_queue_len;  /* receive buffers in the SRQ */
    unsigned long      gid_index;     /* UCS_ULUNITS_AUTO: RoCE v2 IPv4 */
    unsigned long      mtu;           /* UCS_ULUNITS_AUTO: active MTU */
    unsigned           tx_queue_len;  /* send queue length of each QP */
    unsigned           tx_ring_min;   /* requests a replay ring starts with */
    unsigned           tx_idle_rings; /* idle endpoints that keep theirs */
    unsigned           tx_cq_len;     /* send CQ size, shared by all QPs */
    unsigned           tx_moderation; /* signal at least every N sends */
    size_t             tx_max_inline; /* MEMUNITS: the parser writes a size_t */
    unsigned           tx_max_sge;
    unsigned           tx_db_batch;   /* requests per doorbell */
    unsigned           amo_guess_words; /* syncmem_amo_guess.h's table */
    size_t             seg_size;      /* bcopy bounce buffer size */
    ucs_time_t         cm_timeout;    /* handshake retransmit interval */
    ucs_time_t         keepalive_interval;
    unsigned           cm_retries;
    unsigned           cm_max_half_open; /* passive QPs with no known peer */
    uct_syncmem_rc_config_t rc;       /* RC_TIMEOUT, RC_RETRY_COUNT */
    unsigned           rc_rnr_retry_count;
    int                reconnect;
    int                reconnect_resume;
    ucs_time_t         reconnect_timeout;
    ucs_time_t         stall_timeout;  /* UCS_TIME_AUTO: from the retries */
    ucs_time_t         op_timeout;
    ucs_time_t         fault_qp_error; /* testing: force QPs to error */
    int                verify;        /* UCT_SYNCMEM_VERIFY_* */
    unsigned           verify_inject; /* tests: corrupt every Nth check */
    size_t             pkey;          /* UCS_HEXUNITS_AUTO: first full member;
                                         size_t: the HEX parser writes one */
    unsigned long      sl;
    unsigned long      traffic_class;
} uct_syncmem_iface_config_t;

typedef void (*uct_syncmem_op_cb_t)(uct_syncmem_op_t *op, ucs_status_t status);

/*
 * Work to do when a send completes: call a user completion, release a
 * bounce buffer, unpack fetched data. RC completes a QP's sends in order,
 * so ops wait in their endpoint's queue in posting order, tagged with the
 * sequence number of their work request; one completion retires every op
 * up to its number (sends in between need no completion of their own).
 */
struct uct_syncmem_op {
    ucs_queue_elem_t      queue;
    uint16_t              sn;
    uct_syncmem_ep_t      *ep;         /* flush */
    uct_syncmem_op_cb_t   handler;
    uct_completion_t      *comp;
    uct_unpack_callback_t unpack_cb;   /* get_bcopy */
    void                  *arg;        /* get_bcopy: unpack_cb's; an atomic:
                                          where its old value goes (NULL:
                                          nobody wants it) */
    size_t                length;
};

/* An op with a registered bounce buffer behind it (bcopy). */
typedef struct uct_syncmem_desc {
    uct_syncmem_op_t super;
    uint32_t         lkey;
} uct_syncmem_desc_t;

/* Largest inline request: the smallest path MTU, so that each is one packet
 * (one PSN: the fast path counts them without looking at the MTU). */
#define UCT_SYNCMEM_MAX_INLINE 256

/* Most scatter/gather entries in one request: an array of them fits on
 * the fast path's stack (a variable one costs a frame pointer). */
#define UCT_SYNCMEM_MAX_SGE    32

/* A receive buffer; see the layout in syncmem_am.c. */
typedef struct uct_syncmem_rx_desc {
    uint32_t lkey;
} uct_syncmem_rx_desc_t;

typedef struct uct_syncmem_rx_link {
    struct uct_syncmem_rx_link *next;
    uint32_t                   new_qpn;  /* 0: forget old_qpn */
    uint32_t                   old_qpn;
} uct_syncmem_rx_link_t;

struct uct_syncmem_iface {
    uct_base_iface_t   super;
    uct_syncmem_port_t port;
    uint64_t           id;        /* tells our own iface address from others */
    struct ibv_cq      *cq;       /* send completions of every RC QP */
    struct ibv_comp_channel *channel; /* wakes users of the event fd */
    struct ibv_wc      stash[2];  /* found while arming; see syncmem_event.c */
    uint8_t            stashed;   /* UCS_BIT(UCT_SYNCMEM_DIR_*) */
    uint8_t            armed;     /* event_arm: the user may sleep now */
    uint8_t            db_quiet;  /* nothing posted since the last progress:
                                   * the next request goes at once */
    uint8_t            keep_any;  /* the operations without variants keep
                                   * their requests for the doorbell:
                                   * TX_DB_BATCH > 1, or some endpoint
                                   * connects (uct_syncmem_ep_set_state)
                                   * or waits for a fence */
    unsigned           fence_waits; /* endpoints whose fence waits
                                     * (uct_syncmem_ep_fence_hold) */
    ucs_list_link_t    eps;
    ucs_list_link_t    db_eps;    /* endpoints with requests to ring */
    khash_t(uct_syncmem_qp_eps) qp_eps;
    ucs_arbiter_t      arbiter;   /* endpoints with pending requests */
    ucs_mpool_t        op_mp;     /* uct_syncmem_op_t */
    ucs_mpool_t        tx_mp;     /* uct_syncmem_desc_t + seg_size bytes */
    struct ibv_mr      *tx_mr;    /* registered tx_mp chunks */
    int                cq_available;
    struct {
        struct ibv_srq  *srq;     /* receive buffers of all its QPs */
        struct ibv_cq   *cq;
        ucs_mpool_t     mp;       /* uct_syncmem_rx_desc_t + headroom + data */
        unsigned        queue_len;
        unsigned        batch;    /* buffers posted at once */
        unsigned        available;/* free SRQ slots */
        unsigned        headroom_offset;
        unsigned        payload_offset;
        uct_recv_desc_t release_desc;
        khash_t(uct_syncmem_qp_sn) last_sn;  /* QP -> last AM sn */
        khash_t(uct_syncmem_qp_link) replaced; /* new QP -> old QP, then
                                                 * the old QP's last sn */
        uct_syncmem_rx_link_t *links;   /* from the async context */
        volatile int    have_links;
    } rx;
    /* Work requests of put_short and am_short, filled once: each call only
     * sets what changes. One for every endpoint (it holds nothing of one
     * after the call), so that an endpoint does not carry 320 bytes of
     * them. */
    struct {
        struct ibv_send_wr wr;
        struct ibv_sge     sge[2];
    } inl_put, inl_am;
    uct_syncmem_ep_t   *dispatching; /* endpoint whose pending queue runs */
    uct_syncmem_ep_t   *keeping;     /* connecting endpoint whose operation
                                        is kept (uct_syncmem_ep_unpark) */
    uct_syncmem_cm_t   cm;
    struct {
        ucs_mpool_t    mp;        /* uct_syncmem_verify_put_t; VERIFY=crc */
        unsigned       inject;    /* corrupt every Nth checked message/put */
        uct_syncmem_verify_counters_t counters;
    } verify;
    struct {
        uct_syncmem_amo_guess_t    guess;  /* table made at the first */
        unsigned                   words;  /* AMO_GUESS_WORDS, a power of
                                              2; 0: no table */
        uct_syncmem_amo_counters_t counters;
    } amo;
    struct {
        unsigned       tx_queue_len;    /* outstanding: TX_QUEUE_LEN less
                                           the drain (and VERIFY's) */
        unsigned       ring_min;        /* entries a replay ring starts with */
        unsigned       idle_rings;      /* TX_IDLE_RINGS */
        unsigned       tx_signal_every; /* TX_MODERATION, at most a quarter
                                           of the send queue */
        unsigned       db_batch;        /* 1: ring on every request */
        unsigned       max_inline;
        unsigned       max_sge;
        unsigned       max_sge_rd;
        size_t         seg_size;
        ucs_time_t     cm_timeout;
        unsigned       cm_retries;
        unsigned       cm_max_half_open;
        ucs_time_t     keepalive_interval;
        uint8_t        rc_timeout;      /* IB encoding: 4.096us * 2^N; the
                                         * fixed value, or 'auto''s first
                                         * (rto.est.exp is the one now) */
        uint8_t        rc_retry_count;
        uint8_t        rc_rnr_retry_count;
        uint8_t        max_rd_atomic;
        int            reconnect;
        int            reconnect_resume;
        ucs_time_t     reconnect_timeout;
        ucs_time_t     op_timeout;      /* UCS_TIME_INFINITY: none */
        ucs_time_t     stall_timeout;   /* UCS_TIME_INFINITY: none; with
                                         * stall_auto the least (each
                                         * endpoint's follows its QP's RC
                                         * timeout: uct_syncmem_ep_stall_timeout) */
        uint8_t        stall_auto;      /* RC_STALL_TIMEOUT=auto, on */
        unsigned       stall_calm;      /* 'auto': that many times longer
                                         * with no link trouble; else 1 */
        ucs_time_t     check_interval;  /* of both; INFINITY: never */
        ucs_time_t     fault_qp_error;
        size_t         replay_data;     /* data area of a replay entry */
        uint8_t        verify;          /* UCT_SYNCMEM_VERIFY_* */
    } config;
    volatile int       check_due;     /* set by the deadline timer, or by
                                       * an operation that found the CQ
                                       * starved (cq_starved) or a ring
                                       * full (grow_due) */
    volatile int       check_tick;    /* the timer's: a check that counts
                                       * for an endpoint's idleness */
    uint8_t            cq_starved;    /* every CQ entry taken: progress
                                       * asks for completions */
    uint8_t            grow_due;      /* an endpoint's ring was full and
                                       * may grow: progress grows it */
    uint8_t            fence_due;     /* a fence's empty write found no
                                       * room: progress posts it */
    unsigned           rings;         /* endpoints that hold a replay ring */
    volatile uint32_t  port_events;   /* syncmem_port.c: from the async
                                       * thread */
    /* RC_TIMEOUT=auto (syncmem_watchdog.c): the round trips the iface's
     * endpoints measure, one estimate for the port (the load it adapts to,
     * a busy host, is the host's, and a new QP needs a value before its
     * own first sample) */
    struct {
        uct_syncmem_rto_t est;        /* fixed RC_TIMEOUT: exp_min ==
                                         exp_max, never sampled */
        uint8_t        adaptive;      /* RC_TIMEOUT=auto */
        uint8_t        rts_modify;    /* the device changes the timeout of
                                         a connected QP: 1 until it
                                         refuses once */
        uint32_t       polls;         /* progress calls: a sample counts
                                         only if its completion was waited
                                         for, not found late */
    } rto;
    ucs_time_t         link_trouble;  /* the last port event, or request
                                       * past its retries or not routed;
                                       * 0: none yet */
    ucs_list_link_t    md_list;       /* in md->ifaces */
    int                check_id;      /* that timer; -1: none */
};

extern ucs_config_field_t uct_syncmem_iface_config_table[];
extern ucs_config_field_t uct_syncmem_rc_config_table[];

/* Soft-RoCE's vendor id (rdma_rxe's RXE_VENDOR_ID): the device that takes
 * an RC retry count of 7 for "retry forever" (syncmem_config.c). */
#define UCT_SYNCMEM_RXE_VENDOR_ID 0xffffff

/* The RC retry count to program for a requested one (0..7), on a device
 * that does (seven_is_infinite) or does not retry forever at 7. */
unsigned uct_syncmem_config_rc_retry_count(unsigned requested,
                                           int seven_is_infinite);
extern uct_tl_t uct_syncmem_tl;  /* UCT_TL_DEFINE_ENTRY, syncmem_iface.c */

/* syncmem_device.c */
ucs_status_t uct_syncmem_device_parse_name(const uct_syncmem_md_t *md,
                                           const char *dev_name,
                                           uint8_t *port_num_p);
ucs_status_t uct_syncmem_port_open(uct_syncmem_md_t *md, uint8_t port_num,
                                   const uct_syncmem_iface_config_t *config,
                                   uct_syncmem_port_t *port);
double uct_syncmem_port_bandwidth(const uct_syncmem_port_t *port);
ucs_status_t uct_syncmem_query_tl_devices(uct_md_h md,
                                          uct_tl_device_resource_t **devices_p,
                                          unsigned *num_devices_p);

/* syncmem_event.c */
ucs_status_t uct_syncmem_iface_event_init(uct_syncmem_iface_t *iface);
ucs_status_t uct_syncmem_iface_event_fd_get(uct_iface_h tl_iface, int *fd_p);
ucs_status_t uct_syncmem_iface_event_arm(uct_iface_h tl_iface, unsigned events);

/* syncmem_am.c */
void uct_syncmem_rx_handle(uct_syncmem_iface_t *iface, const struct ibv_wc *wc);
ucs_status_t uct_syncmem_rx_init(uct_syncmem_iface_t *iface,
                                 const uct_iface_params_t *params,
                                 const uct_syncmem_iface_config_t *config);
void uct_syncmem_rx_cleanup(uct_syncmem_iface_t *iface);
unsigned uct_syncmem_rx_post(uct_syncmem_iface_t *iface, unsigned max);
unsigned uct_syncmem_rx_progress(uct_syncmem_iface_t *iface);
void uct_syncmem_rx_release_desc(uct_recv_desc_t *self, void *desc);

/* syncmem_rx_dedup.c: receive side of reconnect */
void uct_syncmem_rx_link_push(uct_syncmem_iface_t *iface, uint32_t new_qpn,
                              uint32_t old_qpn);
void uct_syncmem_rx_links_apply(uct_syncmem_iface_t *iface);
int uct_syncmem_rx_is_replayed(uct_syncmem_iface_t *iface, uint32_t qpn,
                               uint16_t sn);

/* syncmem_port.c: the port events of an iface */
void uct_syncmem_port_events_add(uct_syncmem_iface_t *iface);
void uct_syncmem_port_events_remove(uct_syncmem_iface_t *iface);
void uct_syncmem_iface_port_events(uct_syncmem_iface_t *iface);

/* syncmem_watchdog.c */
void uct_syncmem_iface_check_deadlines(uct_syncmem_iface_t *iface);
ucs_status_t uct_syncmem_watchdog_init(uct_syncmem_iface_t *iface);
void uct_syncmem_watchdog_cleanup(uct_syncmem_iface_t *iface);
/* RC_TIMEOUT and RC_STALL_TIMEOUT from the config, at iface init */
void uct_syncmem_watchdog_rto_init(uct_syncmem_iface_t *iface,
                                   const uct_syncmem_iface_config_t *config);
ucs_time_t
uct_syncmem_watchdog_stall_timeout(const uct_syncmem_iface_t *iface,
                                   const uct_syncmem_iface_config_t *config);

/* syncmem_amo.c: the emulated atomics' guesses (AMO_GUESS_WORDS) */
void uct_syncmem_amo_init(uct_syncmem_iface_t *iface,
                          const uct_syncmem_iface_config_t *config);
void uct_syncmem_amo_cleanup(uct_syncmem_iface_t *iface);

/* syncmem_verify.c: UCX_SYNCMEM_VERIFY=crc */
extern const char *uct_syncmem_verify_names[];
ucs_status_t uct_syncmem_verify_init(uct_syncmem_iface_t *iface,
                                     const uct_syncmem_iface_config_t *config);
void uct_syncmem_verify_cleanup(uct_syncmem_iface_t *iface);
/* A received message with a CRC trailer: 1 if it is intact (and *length_p
 * then excludes the trailer), 0 if it must be dropped */
int uct_syncmem_verify_am_rx(uct_syncmem_iface_t *iface,
                             const struct ibv_wc *wc, void *data,
                             unsigned *length_p);

/* syncmem_crc.c: CRC32C (Castagnoli), chained like zlib's crc32:
 * crc(0, "123456789") is 0xe3069283, and crc(crc(0, a), b) == crc(0, a b) */
uint32_t uct_syncmem_crc32c(uint32_t crc, const void *buf, size_t length);

/* syncmem_doorbell.c: ring every endpoint with requests kept */
void uct_syncmem_iface_ring_all(uct_syncmem_iface_t *iface);

#endif
