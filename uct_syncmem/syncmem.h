/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - UCT transport over ibverbs: shared definitions.
 *
 * Objects: one component ("syncmem"), one memory domain per verbs device
 * (named after it, e.g. "rxe0"), one transport ("syncmem") with one UCT
 * device per active port (e.g. "rxe0:1").
 */
#ifndef UCT_SYNCMEM_H_
#define UCT_SYNCMEM_H_

#include "compat.h"
#include "syncmem_ep_fsm.h"

#include <uct/base/uct_md.h>
#include <uct/base/uct_iface.h>
#include <ucs/sys/string.h>
#include <ucs/datastruct/khash.h>
#include <ucs/type/spinlock.h>
#include <infiniband/verbs.h>

#define UCT_SYNCMEM_NAME         "syncmem"
#define UCT_SYNCMEM_CONFIG_PREFIX "SYNCMEM_"


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


typedef struct uct_syncmem_md_config {
    uct_md_config_t        super;
    int                    rcache_mode;  /* ucs_ternary_auto_value_t */
    uct_syncmem_rcache_config_t rcache;
    size_t                 reg_align;    /* UCS_MEMUNITS_AUTO: page size */
    unsigned               cuda_reg_cache; /* unused CUDA registrations kept */
    size_t                 cuda_reg_cache_size; /* ...and their bytes */
} uct_syncmem_md_config_t;


/* What the registration cache did, since the MD was opened. */
typedef struct uct_syncmem_rcache_counters {
    uint64_t hits;          /* mem_reg served by a cached registration */
    uint64_t misses;        /* mem_reg that registered memory */
    uint64_t evictions;     /* unused registrations dropped by LRU limits */
    uint64_t invalidations; /* dropped because unmapped, or merged away */
} uct_syncmem_rcache_counters_t;


typedef struct uct_syncmem_cuda_cache uct_syncmem_cuda_cache_t;

typedef struct uct_syncmem_md {
    uct_md_t               super;
    struct ibv_context     *ctx;
    struct ibv_pd          *pd;
    struct ibv_device_attr dev_attr;
    char                   name[UCT_MD_NAME_MAX];  /* verbs device name */
    ucs_rcache_t           *rcache;   /* NULL: every mem_reg registers */
    ucs_linear_func_t      reg_cost;  /* what mem_reg costs, for UCP */
    uct_syncmem_cuda_cache_t *cuda;   /* NULL: no CUDA driver */
    int                    dmabuf;    /* the device takes dma-buf MRs */
    int                    peermem;   /* a peer-memory module is loaded */
    size_t                 reg_align;
    size_t                 rcache_align; /* of every cached region */
    int                    closing;
    uct_syncmem_rcache_counters_t rcache_counters;
    ucs_list_link_t        ifaces;       /* uct_syncmem_iface_t, port events */
    ucs_spinlock_t         iface_lock;   /* ...taken by the async thread */
    int                    async_events; /* the async fd has a handler */
    ucs_sys_device_t       sys_dev;      /* the HCA's PCI function */
} uct_syncmem_md_t;


#define UCT_SYNCMEM_RKEY_MAGIC 0x5d

/* What a peer needs to access our memory: the verbs rkey. The magic byte
 * and CRC make a garbled or foreign key an error at unpack time. */
typedef struct UCS_S_PACKED uct_syncmem_packed_rkey {
    uint8_t  magic;
    uint32_t rkey;
    uint16_t crc;
} uct_syncmem_packed_rkey_t;


/* A registration: what uct_mem_h points to. */
typedef struct uct_syncmem_mem {
    struct ibv_mr *mr;
    unsigned      flags;  /* UCT_SYNCMEM_MEM_FLAG_* */
} uct_syncmem_mem_t;

enum {
    UCT_SYNCMEM_MEM_FLAG_CACHED = UCS_BIT(0), /* in a uct_syncmem_rregion_t */
    UCT_SYNCMEM_MEM_FLAG_CUDA   = UCS_BIT(1)  /* in a uct_syncmem_cuda_region_t */
};


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

typedef struct uct_syncmem_iface_config {
    uct_iface_config_t super;
    unsigned           rx_queue_len;  /* receive buffers in the SRQ */
    unsigned long      gid_index;     /* UCS_ULUNITS_AUTO: RoCE v2 IPv4 */
    unsigned long      mtu;           /* UCS_ULUNITS_AUTO: active MTU */
    unsigned           tx_queue_len;  /* send queue depth of each QP */
    unsigned           tx_cq_len;     /* send CQ size, shared by all QPs */
    unsigned           tx_moderation; /* signal at least every N sends */
    size_t             tx_max_inline; /* MEMUNITS: the parser writes a size_t */
    unsigned           tx_max_sge;
    unsigned           tx_db_batch;   /* requests per doorbell */
    size_t             seg_size;      /* bcopy bounce buffer size */
    ucs_time_t         cm_timeout;    /* handshake retransmit interval */
    ucs_time_t         keepalive_interval;
    unsigned           cm_retries;
    unsigned           cm_max_half_open; /* passive QPs with no known peer */
    double             rc_timeout;    /* RC ack timeout, seconds */
    unsigned           rc_retry_count;
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


typedef struct uct_syncmem_iface uct_syncmem_iface_t;
typedef struct uct_syncmem_op    uct_syncmem_op_t;

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
    struct uct_syncmem_ep *ep;         /* flush */
    uct_syncmem_op_cb_t   handler;
    uct_completion_t      *comp;
    uct_unpack_callback_t unpack_cb;   /* get_bcopy */
    void                  *unpack_arg;
    size_t                length;
};

/* An op with a registered bounce buffer behind it (bcopy). */
typedef struct uct_syncmem_desc {
    uct_syncmem_op_t super;
    uint32_t         lkey;
} uct_syncmem_desc_t;


#define UCT_SYNCMEM_PSN_MASK  0xffffffu /* PSNs are 24 bits */
#define UCT_SYNCMEM_RESUME_MAX_PKTS 128 /* Soft-RoCE's unacknowledged PSNs:
                                          a longer request is not resumed
                                          (uct_syncmem_replay_resume_risk) */
/* Largest inline request: the smallest path MTU, so that each is one packet
 * (one PSN: the fast path counts them without looking at the MTU). */
#define UCT_SYNCMEM_MAX_INLINE 256

/* Most scatter/gather entries in one request: an array of them fits on
 * the fast path's stack (a variable one costs a frame pointer). */
#define UCT_SYNCMEM_MAX_SGE    32

/*
 * A request as it was posted, kept until it completes, so that a reconnect
 * can post it again and a doorbell can post it at all (syncmem_replay.c).
 * Written once by the operation; the work request is made from it. data[]
 * holds the bytes of an inline request (the source may be the caller's
 * stack), else the atomic operands (compare_add, swap) and then the
 * scatter list, whose memory (bounce buffer or the user's zcopy buffer) is
 * held until completion. Its PSNs are not kept: a reconnect counts them
 * back from the endpoint's next_psn (uct_syncmem_replay_npkts).
 */
typedef struct uct_syncmem_replay {
    uint64_t remote_addr;
    uint32_t rkey;
    uint32_t imm_data;
    uint32_t length;     /* bytes it moves (a read: reads) */
    uint8_t  opcode;     /* enum ibv_wr_opcode */
    uint8_t  send_flags;
    uint8_t  num_sge;    /* of the scatter list; not set when inline */
    uint8_t  lost;       /* an atomic whose outcome a reconnect lost;
                            not set when inline (never an atomic) */
    uint64_t data[];
} uct_syncmem_replay_t;

typedef struct uct_syncmem_ep {
    uct_base_ep_t        super;
    struct ibv_qp        *qp;
    ucs_list_link_t      list;          /* in iface->eps */
    ucs_arbiter_group_t  arb_group;     /* pending requests */
    uint8_t              state;         /* uct_syncmem_ep_state_t: only
                                           syncmem_ep_fsm.c decides it */
    uint8_t              fence;         /* fence the next work request */
    ucs_status_t         status;        /* why the endpoint failed */
    unsigned             amo_inflight;  /* emulated atomics not done yet */
    ucs_list_link_t      db_list;       /* in iface->db_eps, or empty */
    struct {
        int              available;     /* free send queue slots */
        uint16_t         sn;            /* of the last posted request */
        uint16_t         rung_sn;       /* ...of the last on the device, while
                                           some wait for the doorbell (in
                                           db_list); see uct_syncmem_ep_rung_sn */
        uint16_t         acked_sn;      /* of the last completed request */
        uint16_t         signaled_sn;   /* of the last signalled request */
        ucs_queue_head_t outstanding;   /* uct_syncmem_op_t, by sn */
    } tx;
    struct {
        uint8_t          *ring;         /* entry of sn: ring + (sn & mask) *
                                           stride; NULL: no reconnect */
        uint32_t         stride;
        uint16_t         mask;
        struct ibv_qp    *old_qp;       /* broken, until its flushes are in */
        uint16_t         fail_sn;       /* first request of unknown outcome */
        uint16_t         old_last_sn;   /* last request posted on old_qp */
        uint16_t         lost_last_sn;  /* the last atomic lost */
        unsigned         lost;          /* atomics lost, not yet retired */
        uint8_t          lost_silent;   /* one without a completion retired:
                                           the next flush reports it */
        uint32_t         next_psn;      /* of the next request posted; its
                                           low 24 bits are the PSN */
        uint8_t          mtu_shift;     /* log2 of the path MTU */
        uint8_t          resume;        /* this generation's REQ asks to
                                           resume */
        uint32_t         old_rq_psn;    /* old_qp's next expected PSN */
        uint16_t         resumed_sn;    /* fail_sn of the last resume */
        uint8_t          resumed_once;  /* ...which is valid */
        ucs_time_t       started;
        ucs_time_t       deadline;
        uint16_t         wd_sn;         /* OP_TIMEOUT watchdog: acked_sn... */
        ucs_time_t       wd_time;       /* ...seen busy since this time */
        ucs_time_t       st_time;       /* stall: no progress since */
        uint32_t         st_psn;        /* stall: send PSN seen... */
        uint8_t          st_psn_valid;  /* ...half-way through */
        uint8_t          stalls;        /* stall reconnects of stall_sn */
        uint16_t         stall_sn;      /* the request that stalled */
    } rc;
    struct {
        uint64_t         conn_id;       /* unique within our iface */
        uint64_t         peer_iface_id;
        uint32_t         peer_cm_qpn;
        uct_syncmem_port_t peer;        /* the peer's port, unpacked */
        struct ibv_ah    *ah;           /* to the peer's CM QP */
        ucs_time_t       next_retry;
        unsigned         retries_left;
        uint32_t         peer_rc_qpn;   /* from the REP */
        uint16_t         gen;           /* bumped by each reconnect */
        volatile uint8_t rep;           /* UCT_SYNCMEM_CM_REP_*: set by the
                                           async handler, taken by progress */
    } cm;
    /* Work requests of put_short and am_short, filled once: each call only
     * sets what changes. In the endpoint, so that the fast path needs no
     * other pointer after its calls. */
    struct {
        struct ibv_send_wr wr;
        struct ibv_sge     sge[2];
    } inl_put, inl_am;
    struct ibv_send_wr   *bad_wr;       /* ibv_post_send's, never read */
} uct_syncmem_ep_t;

/* The last request on the device: after it, requests wait in the ring for
 * the doorbell (batching), and only then is rung_sn kept. */
static inline uint16_t
uct_syncmem_ep_rung_sn(uct_syncmem_ep_t *ep)
{
    return ucs_list_is_empty(&ep->db_list) ? ep->tx.sn : ep->tx.rung_sn;
}


/* A receive buffer; see the layout in syncmem_am.c. */
typedef struct uct_syncmem_rx_desc {
    uint32_t lkey;
} uct_syncmem_rx_desc_t;


/* Handshake state of an iface; see syncmem_cm.c. */
typedef struct uct_syncmem_cm {
    struct ibv_comp_channel *channel; /* wakes the async handler */
    struct ibv_cq    *cq;
    struct ibv_qp    *qp;            /* UD */
    struct ibv_mr    *mr;
    void             *bufs;
    unsigned         send_head;      /* next send slot */
    unsigned         sends_posted;
    uint64_t         next_conn_id;
    unsigned         connecting;     /* endpoints waiting for a reply */
    ucs_list_link_t  passive;        /* uct_syncmem_cm_passive_t */
    int              keepalive_id;   /* async timer; -1: none */
    unsigned         probes_posted;  /* keepalive writes in flight */
    struct uct_syncmem_cm_retired_ah *retired;
    struct uct_syncmem_cm_tomb *tombs; /* passive QPs the keepalive freed */
    unsigned         num_tombs;
    unsigned         half_open;      /* passive, no keepalive answered yet */
    unsigned         dropped;        /* messages dropped, not yet reported */
    unsigned         refused;        /* REQs refused, not yet reported */
    ucs_time_t       drop_report_time;
    int              fault_id;       /* FAULT_QP_ERROR timer; -1: none */
} uct_syncmem_cm_t;


/* Receive side of reconnect: the last AM request number seen per QP, and
 * for a QP that replaced another, the one it replaced (syncmem_am.c). */
KHASH_MAP_INIT_INT(uct_syncmem_qp_sn, uint16_t)
KHASH_MAP_INIT_INT(uct_syncmem_qp_link, uint64_t)

typedef struct uct_syncmem_rx_link {
    struct uct_syncmem_rx_link *next;
    uint32_t                   new_qpn;  /* 0: forget old_qpn */
    uint32_t                   old_qpn;
} uct_syncmem_rx_link_t;


/* Send completions name their QP; this finds the endpoint behind it. */
KHASH_MAP_INIT_INT(uct_syncmem_qp_eps, struct uct_syncmem_ep*)

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
    struct uct_syncmem_ep *dispatching; /* endpoint whose pending queue runs */
    uct_syncmem_cm_t   cm;
    struct {
        ucs_mpool_t    mp;        /* uct_syncmem_verify_put_t; VERIFY=crc */
        unsigned       inject;    /* corrupt every Nth checked message/put */
        uct_syncmem_verify_counters_t counters;
    } verify;
    struct {
        unsigned       tx_queue_len;
        unsigned       tx_signal_mask;  /* TX_MODERATION - 1, a power of 2 */
        unsigned       db_batch;        /* 1: ring on every request */
        unsigned       max_inline;
        unsigned       max_sge;
        unsigned       max_sge_rd;
        size_t         seg_size;
        ucs_time_t     cm_timeout;
        unsigned       cm_retries;
        unsigned       cm_max_half_open;
        ucs_time_t     keepalive_interval;
        uint8_t        rc_timeout;      /* IB encoding: 4.096us * 2^N */
        uint8_t        rc_retry_count;
        uint8_t        rc_rnr_retry_count;
        uint8_t        max_rd_atomic;
        int            reconnect;
        int            reconnect_resume;
        ucs_time_t     reconnect_timeout;
        ucs_time_t     op_timeout;      /* UCS_TIME_INFINITY: none */
        ucs_time_t     stall_timeout;   /* UCS_TIME_INFINITY: none */
        ucs_time_t     check_interval;  /* of both; INFINITY: never */
        ucs_time_t     fault_qp_error;
        size_t         replay_data;     /* data area of a replay entry */
        uint8_t        verify;          /* UCT_SYNCMEM_VERIFY_* */
    } config;
    volatile int       check_due;     /* set by the deadline timer */
    volatile uint32_t  port_events;   /* syncmem_port.c, from the async thread */
    ucs_list_link_t    md_list;       /* in md->ifaces */
    int                check_id;      /* that timer; -1: none */
};


extern uct_component_t uct_syncmem_component;
extern ucs_config_field_t uct_syncmem_iface_config_table[];
extern uct_tl_t uct_syncmem_tl;  /* UCT_TL_DEFINE_ENTRY, syncmem_iface.c */

/* syncmem_md.c */
int uct_syncmem_md_access(unsigned flags);
ucs_status_t uct_syncmem_reg_mr(uct_syncmem_md_t *md, void *address,
                                size_t length, int access,
                                ucs_log_level_t level, struct ibv_mr **mr_p);
ucs_status_t uct_syncmem_reg_dmabuf_mr(uct_syncmem_md_t *md, int fd,
                                       uint64_t offset, size_t length,
                                       uintptr_t iova, int access,
                                       ucs_log_level_t level,
                                       struct ibv_mr **mr_p);
void uct_syncmem_dereg_mr(struct ibv_mr *mr);
/* Registers length bytes at offset of dma-buf fd, which the caller has
 * mapped at address (the address remote keys refer to). A syncmem
 * extension: UCX 1.13's UCT has no dma-buf in its API. */
ucs_status_t uct_syncmem_md_mem_reg_dmabuf(uct_md_h md, int fd,
                                           uint64_t offset, size_t length,
                                           void *address, unsigned flags,
                                           uct_mem_h *memh_p);

/* syncmem_cuda.c */
/* What the driver says of an address in CUDA device memory. */
typedef struct uct_syncmem_cuda_info {
    uintptr_t base;      /* its allocation */
    size_t    size;
    int       ordinal;   /* its GPU */
    ucs_sys_device_t sys_dev;
} uct_syncmem_cuda_info_t;

ucs_status_t uct_syncmem_cuda_init(uct_syncmem_md_t *md, unsigned max_unused,
                                   size_t max_unused_bytes);
void uct_syncmem_cuda_cleanup(uct_syncmem_md_t *md);
/* The process has loaded the CUDA driver (only then can it hold CUDA
 * memory), and it works; loads ours on the first call that sees it. */
int uct_syncmem_cuda_in_use(void);
/* Whether address is CUDA device memory (not managed memory). */
int uct_syncmem_cuda_owns(const void *address);
/* Whether address lies in an allocation registered lately: a hint. */
int uct_syncmem_cuda_hinted(const uct_syncmem_md_t *md, const void *address);
int uct_syncmem_cuda_can_reg(const uct_syncmem_md_t *md);
/* The verbs access every CUDA registration of md gets. */
int uct_syncmem_cuda_access(const uct_syncmem_md_t *md);
/* UCS_ERR_NO_ELEM: not CUDA memory. Registers with every access. */
ucs_status_t uct_syncmem_cuda_reg(uct_syncmem_md_t *md, void *address,
                                  size_t length, ucs_log_level_t level,
                                  uct_syncmem_mem_t **memh_p);
void uct_syncmem_cuda_dereg(uct_syncmem_md_t *md, uct_syncmem_mem_t *memh);
/* UCS_ERR_NO_ELEM: not CUDA memory. */
ucs_status_t uct_syncmem_cuda_mem_info(const void *address,
                                       uct_syncmem_cuda_info_t *info);
ucs_status_t uct_syncmem_cuda_detect(uct_md_h md, const void *address,
                                     size_t length,
                                     ucs_memory_type_t *mem_type_p);

/* syncmem_rcache.c */
ucs_status_t uct_syncmem_rcache_init(uct_syncmem_md_t *md,
                                     const uct_syncmem_md_config_t *config);
void uct_syncmem_rcache_cleanup(uct_syncmem_md_t *md);
ucs_status_t uct_syncmem_rcache_reg(uct_syncmem_md_t *md, void *address,
                                    size_t length, int access,
                                    ucs_log_level_t level,
                                    uct_syncmem_mem_t **memh_p);
void uct_syncmem_rcache_dereg(uct_syncmem_md_t *md, uct_syncmem_mem_t *memh);
/* For tests and tools: the counters of md's cache; UNSUPPORTED without one */
ucs_status_t uct_syncmem_md_rcache_counters(uct_md_h md,
                                            uct_syncmem_rcache_counters_t *c);

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

/* syncmem_qp.c */
void uct_syncmem_qp_init_attr(uct_syncmem_iface_t *iface,
                              struct ibv_qp_init_attr *init);
ucs_status_t uct_syncmem_qp_create(uct_syncmem_iface_t *iface,
                                   struct ibv_cq *send_cq,
                                   struct ibv_qp **qp_p);
ucs_status_t uct_syncmem_qp_connect(uct_syncmem_iface_t *iface,
                                    struct ibv_qp *qp,
                                    const uct_syncmem_port_t *peer,
                                    uint32_t dest_qpn);
ucs_status_t uct_syncmem_qp_resume(uct_syncmem_iface_t *iface,
                                   struct ibv_qp *qp,
                                   const uct_syncmem_port_t *peer,
                                   uint32_t dest_qpn, uint32_t sq_psn,
                                   uint32_t rq_psn);
ucs_status_t uct_syncmem_qp_reinit(uct_syncmem_iface_t *iface,
                                   struct ibv_qp *qp);
enum ibv_qp_state uct_syncmem_qp_query(struct ibv_qp *qp, uint32_t *rq_psn_p);
enum ibv_mtu uct_syncmem_qp_path_mtu(uct_syncmem_iface_t *iface,
                                     const uct_syncmem_port_t *peer);
ucs_status_t uct_syncmem_ah_create(uct_syncmem_iface_t *iface,
                                   const uct_syncmem_port_t *peer,
                                   struct ibv_ah **ah_p);
ucs_status_t uct_syncmem_wc_status(enum ibv_wc_status status);
/* What to check when a work completion has this status (one line, naming
 * the UCX_SYNCMEM_* setting where one helps); never NULL */
const char *uct_syncmem_wc_advice(enum ibv_wc_status status);
/* Logs a failed send completion of ep at the iface's failure level */
void uct_syncmem_wc_log(uct_syncmem_iface_t *iface, uct_syncmem_ep_t *ep,
                        const struct ibv_wc *wc);

/* syncmem_cm.c */
ucs_status_t uct_syncmem_cm_init(uct_syncmem_iface_t *iface);
void uct_syncmem_cm_cleanup(uct_syncmem_iface_t *iface);
ucs_status_t uct_syncmem_cm_connect(uct_syncmem_ep_t *ep);
void uct_syncmem_cm_disconnect(uct_syncmem_ep_t *ep);
void uct_syncmem_cm_reconnect(uct_syncmem_ep_t *ep);
void uct_syncmem_cm_send_req(uct_syncmem_ep_t *ep);
/* For tests: connections this iface accepted and still holds */
unsigned uct_syncmem_iface_num_passive(uct_iface_h iface);

enum {
    UCT_SYNCMEM_DIR_TX,
    UCT_SYNCMEM_DIR_RX
};

/* syncmem_iface.c */
void uct_syncmem_tx_handle(uct_syncmem_iface_t *iface, const struct ibv_wc *wc);

/* syncmem_event.c */
ucs_status_t uct_syncmem_iface_event_init(uct_syncmem_iface_t *iface);
ucs_status_t uct_syncmem_iface_event_fd_get(uct_iface_h tl_iface, int *fd_p);
ucs_status_t uct_syncmem_iface_event_arm(uct_iface_h tl_iface, unsigned events);
unsigned uct_syncmem_iface_unstash(uct_syncmem_iface_t *iface);

/* syncmem_am.c */
void uct_syncmem_rx_handle(uct_syncmem_iface_t *iface, const struct ibv_wc *wc);
ucs_status_t uct_syncmem_rx_init(uct_syncmem_iface_t *iface,
                                 const uct_iface_params_t *params,
                                 const uct_syncmem_iface_config_t *config);
void uct_syncmem_rx_cleanup(uct_syncmem_iface_t *iface);
unsigned uct_syncmem_rx_post(uct_syncmem_iface_t *iface, unsigned max);
unsigned uct_syncmem_rx_progress(uct_syncmem_iface_t *iface);
void uct_syncmem_rx_release_desc(uct_recv_desc_t *self, void *desc);

/* syncmem_replay.c: the replay ring, the doorbell, lost atomics */
enum {
    UCT_SYNCMEM_POST_RING,    /* the doorbell: requests kept, not posted */
    UCT_SYNCMEM_POST_AGAIN,   /* a reconnect's, on a new QP */
    UCT_SYNCMEM_POST_RESUMED  /* a reconnect's, on the resumed QP */
};
ucs_status_t uct_syncmem_replay_ep_init(uct_syncmem_ep_t *ep);
void uct_syncmem_replay_ep_cleanup(uct_syncmem_ep_t *ep);
void uct_syncmem_replay_destroy_old_qp(uct_syncmem_ep_t *ep);
ucs_status_t uct_syncmem_replay_post(uct_syncmem_ep_t *ep, uint16_t first,
                                     uint16_t count, int how);
uint32_t uct_syncmem_replay_npkts(const uct_syncmem_ep_t *ep, uint16_t first,
                                  uint16_t count);
const char *uct_syncmem_replay_resume_risk(const uct_syncmem_ep_t *ep,
                                           uint16_t first, uint16_t last);
void uct_syncmem_ep_purge(uct_syncmem_ep_t *ep, ucs_status_t status);
ucs_status_t uct_syncmem_ep_op_status(uct_syncmem_ep_t *ep,
                                      const uct_syncmem_op_t *op,
                                      ucs_status_t status);
ucs_status_t uct_syncmem_ep_lost_status(uct_syncmem_ep_t *ep);
void uct_syncmem_ep_ring(uct_syncmem_ep_t *ep);
void uct_syncmem_iface_ring_all(uct_syncmem_iface_t *iface);

/* syncmem_reconnect.c: the endpoint's events in, the state machine's
 * actions out (syncmem_ep_fsm.c). Each returns UCS_OK, or the status the
 * event failed the endpoint with: its error handler has run, and the
 * endpoint may be gone. Called without the async lock. */
ucs_status_t uct_syncmem_ep_event(uct_syncmem_ep_t *ep,
                                  uct_syncmem_ep_ev_t event);
ucs_status_t uct_syncmem_ep_fail(uct_syncmem_ep_t *ep, ucs_status_t status);
void uct_syncmem_ep_tx_error(uct_syncmem_ep_t *ep, const struct ibv_wc *wc);
/* While endpoints connect: the REPs the async handler noted, the timer. */
unsigned uct_syncmem_iface_connect_progress(uct_syncmem_iface_t *iface);

/* syncmem_port.c: the device's async events */
ucs_status_t uct_syncmem_port_events_init(uct_syncmem_md_t *md);
void uct_syncmem_port_events_cleanup(uct_syncmem_md_t *md);
void uct_syncmem_port_events_add(uct_syncmem_iface_t *iface);
void uct_syncmem_port_events_remove(uct_syncmem_iface_t *iface);
void uct_syncmem_iface_port_events(uct_syncmem_iface_t *iface);

/* syncmem_am.c: receive side of reconnect */
void uct_syncmem_rx_link_push(uct_syncmem_iface_t *iface, uint32_t new_qpn,
                              uint32_t old_qpn);
void uct_syncmem_rx_links_apply(uct_syncmem_iface_t *iface);
int uct_syncmem_rx_is_replayed(uct_syncmem_iface_t *iface, uint32_t qpn,
                               uint16_t sn);

/* syncmem_watchdog.c */
void uct_syncmem_iface_check_deadlines(uct_syncmem_iface_t *iface);
ucs_status_t uct_syncmem_watchdog_init(uct_syncmem_iface_t *iface);
void uct_syncmem_watchdog_cleanup(uct_syncmem_iface_t *iface);

/* For tests: move ep's QP to the error state, as a broken link would. */
ucs_status_t uct_syncmem_ep_inject_qp_error(uct_ep_h ep);
/* For tests: how often ep has reconnected. */
unsigned uct_syncmem_ep_reconnects(uct_ep_h ep);
/* syncmem_verify.c: UCX_SYNCMEM_VERIFY=crc */
extern const char *uct_syncmem_verify_names[];
/* CRC32C (Castagnoli), chained like zlib's crc32: crc(0, "123456789") is
 * 0xe3069283, and crc(crc(0, a), b) == crc(0, a b) */
uint32_t uct_syncmem_crc32c(uint32_t crc, const void *buf, size_t length);
uint32_t uct_syncmem_crc32c_sw(uint32_t crc, const void *buf, size_t length);
ucs_status_t uct_syncmem_verify_init(uct_syncmem_iface_t *iface,
                                     const uct_syncmem_iface_config_t *config);
void uct_syncmem_verify_cleanup(uct_syncmem_iface_t *iface);
/* A received message with a CRC trailer: 1 if it is intact (and *length_p
 * then excludes the trailer), 0 if it must be dropped */
int uct_syncmem_verify_am_rx(uct_syncmem_iface_t *iface,
                             const struct ibv_wc *wc, void *data,
                             unsigned *length_p);
void uct_syncmem_iface_verify_counters(uct_iface_h iface,
                                       uct_syncmem_verify_counters_t *c);

/* syncmem_ep.c */
void uct_syncmem_op_release(uct_syncmem_op_t *op, ucs_status_t status);
void uct_syncmem_op_complete(uct_syncmem_op_t *op, ucs_status_t status);
void uct_syncmem_ep_connected(uct_syncmem_ep_t *ep);
void uct_syncmem_ep_flush_done(uct_syncmem_op_t *op, ucs_status_t status);
/* The FAIL and CANCEL actions' parts, once the state is FAILED */
void uct_syncmem_ep_qp_to_error(uct_syncmem_ep_t *ep);
void uct_syncmem_ep_notify_failed(uct_syncmem_ep_t *ep, ucs_status_t status);
void uct_syncmem_ep_tx_completed(uct_syncmem_ep_t *ep, uint16_t sn,
                                 ucs_status_t status);
ucs_arbiter_cb_result_t uct_syncmem_ep_pending_dispatch(ucs_arbiter_t *arbiter,
                                                        ucs_arbiter_group_t *group,
                                                        ucs_arbiter_elem_t *elem,
                                                        void *arg);

/* Endpoint operations, one file per concern: syncmem_rma.c, syncmem_am.c,
 * syncmem_amo.c, syncmem_ep.c. */
ucs_status_t uct_syncmem_ep_put_short(uct_ep_h, const void*, unsigned,
                                      uint64_t, uct_rkey_t);
ucs_status_t uct_syncmem_ep_put_short_ring(uct_ep_h, const void*, unsigned,
                                           uint64_t, uct_rkey_t);
ucs_status_t uct_syncmem_ep_put_short_batch(uct_ep_h, const void*, unsigned,
                                            uint64_t, uct_rkey_t);
ssize_t uct_syncmem_ep_put_bcopy(uct_ep_h, uct_pack_callback_t, void*,
                                 uint64_t, uct_rkey_t);
ucs_status_t uct_syncmem_ep_put_zcopy(uct_ep_h, const uct_iov_t*, size_t,
                                      uint64_t, uct_rkey_t, uct_completion_t*);
ucs_status_t uct_syncmem_ep_get_bcopy(uct_ep_h, uct_unpack_callback_t, void*,
                                      size_t, uint64_t, uct_rkey_t,
                                      uct_completion_t*);
ucs_status_t uct_syncmem_ep_get_zcopy(uct_ep_h, const uct_iov_t*, size_t,
                                      uint64_t, uct_rkey_t, uct_completion_t*);
ucs_status_t uct_syncmem_ep_am_short(uct_ep_h, uint8_t, uint64_t, const void*,
                                     unsigned);
ucs_status_t uct_syncmem_ep_am_short_ring(uct_ep_h, uint8_t, uint64_t,
                                          const void*, unsigned);
ucs_status_t uct_syncmem_ep_am_short_batch(uct_ep_h, uint8_t, uint64_t,
                                           const void*, unsigned);
ucs_status_t uct_syncmem_ep_am_short_iov(uct_ep_h, uint8_t, const uct_iov_t*,
                                         size_t);
ssize_t uct_syncmem_ep_am_bcopy(uct_ep_h, uint8_t, uct_pack_callback_t, void*,
                                unsigned);
ucs_status_t uct_syncmem_ep_am_zcopy(uct_ep_h, uint8_t, const void*, unsigned,
                                     const uct_iov_t*, size_t, unsigned,
                                     uct_completion_t*);
ucs_status_t uct_syncmem_ep_atomic64_post(uct_ep_h, unsigned, uint64_t,
                                          uint64_t, uct_rkey_t);
ucs_status_t uct_syncmem_ep_atomic32_post(uct_ep_h, unsigned, uint32_t,
                                          uint64_t, uct_rkey_t);
ucs_status_t uct_syncmem_ep_atomic64_fetch(uct_ep_h, uct_atomic_op_t, uint64_t,
                                           uint64_t*, uint64_t, uct_rkey_t,
                                           uct_completion_t*);
ucs_status_t uct_syncmem_ep_atomic32_fetch(uct_ep_h, uct_atomic_op_t, uint32_t,
                                           uint32_t*, uint64_t, uct_rkey_t,
                                           uct_completion_t*);
ucs_status_t uct_syncmem_ep_atomic_cswap64(uct_ep_h, uint64_t, uint64_t,
                                           uint64_t, uct_rkey_t, uint64_t*,
                                           uct_completion_t*);
ucs_status_t uct_syncmem_ep_atomic_cswap32(uct_ep_h, uint32_t, uint32_t,
                                           uint64_t, uct_rkey_t, uint32_t*,
                                           uct_completion_t*);
ucs_status_t uct_syncmem_ep_flush(uct_ep_h, unsigned, uct_completion_t*);
ucs_status_t uct_syncmem_ep_check(uct_ep_h, unsigned, uct_completion_t*);
#if UCT_SYNCMEM_UCX_SINCE(1, 16)
int uct_syncmem_ep_is_connected(const uct_ep_h,
                                const uct_ep_is_connected_params_t*);
#endif
ucs_status_t uct_syncmem_ep_fence(uct_ep_h, unsigned);
ucs_status_t uct_syncmem_ep_pending_add(uct_ep_h, uct_pending_req_t*, unsigned);
void uct_syncmem_ep_pending_purge(uct_ep_h, uct_pending_purge_callback_t,
                                  void*);

#endif
