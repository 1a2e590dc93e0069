/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - the connection handshake's messages and tables, shared by the
 * part that decides (syncmem_cm_msg.c: no verbs calls, fuzzed on any
 * machine by test/fuzz/fuzz_cm.c) and the part that does (syncmem_cm.c:
 * QPs, address handles, sends, the async handler).
 */
#ifndef UCT_SYNCMEM_CM_H_
#define UCT_SYNCMEM_CM_H_

#include "syncmem.h"
#include "syncmem_addr.h"
#include "syncmem_qp.h"

/* Handshake state of an iface; see syncmem_cm.c. */
/* What the handshake's drop reports saw (uct_syncmem_cm_flood_report). */
typedef struct uct_syncmem_cm_flood {
    ucs_time_t       report_time;    /* of the last report; 0: none */
    ucs_time_t       refusing_since; /* refusals in each report since, and
                                        no connection confirmed; 0: none */
    unsigned         confirmed;      /* cm.confirmed at the last report */
    uint8_t          warned;         /* this episode's warning is said */
} uct_syncmem_cm_flood_t;

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
    khash_t(uct_syncmem_ahs) ahs;    /* kept while the iface lives, so
                                        that no send in flight outlives
                                        its AH */
    struct uct_syncmem_cm_tomb *tombs; /* passive QPs the keepalive freed */
    unsigned         num_tombs;
    unsigned         half_open;      /* passive, no keepalive answered yet */
    struct uct_syncmem_cm_deferred *deferred; /* REQs refused for room,
                                        allocated only while some wait */
    unsigned         num_deferred;
    unsigned         max_deferred;   /* room in deferred */
    unsigned         dropped;        /* messages for another iface (stale
                                        peers' too), not yet reported */
    unsigned         malformed;      /* messages no peer sends, ditto */
    unsigned         refused;        /* REQs refused, not yet reported */
    unsigned         refused_total;  /* ...and ever (a test hook reads it) */
    unsigned         busy_total;     /* BUSY answers our endpoints took,
                                        ever (a test hook reads it) */
    unsigned         confirmed;      /* half-open connections confirmed */
    uct_syncmem_cm_flood_t flood;    /* what the reports saw */
    int              fault_id;       /* FAULT_QP_ERROR timer; -1: none */
    uint8_t          refuse_writes;  /* tests: passive QPs made from now
                                        on refuse RDMA writes too */
} uct_syncmem_cm_t;

/* syncmem_cm.c */
ucs_status_t uct_syncmem_cm_init(uct_syncmem_iface_t *iface);
void uct_syncmem_cm_cleanup(uct_syncmem_iface_t *iface);
ucs_status_t uct_syncmem_cm_connect(uct_syncmem_ep_t *ep);
void uct_syncmem_cm_disconnect(uct_syncmem_ep_t *ep);
void uct_syncmem_cm_reconnect(uct_syncmem_ep_t *ep);
void uct_syncmem_cm_send_req(uct_syncmem_ep_t *ep);
void uct_syncmem_cm_send_rtu(uct_syncmem_ep_t *ep);

#define UCT_SYNCMEM_CM_GRH_LEN  40          /* UD receives start with it */
#define UCT_SYNCMEM_CM_SLOT     128
/* Sized for a connection storm: an initiator sends the REQs of all the
 * endpoints it creates at once (a send slot each), the target takes them
 * in (a receive slot each) and probes the half-open connections they make
 * (the default CM_MAX_HALF_OPEN), to make room for more. */
#define UCT_SYNCMEM_CM_RECVS    256
#define UCT_SYNCMEM_CM_SENDS    128
#define UCT_SYNCMEM_CM_PROBES   256         /* keepalive writes in flight */
/* Released connections are remembered for as long as a reconnect may still
 * name them (syncmem_cm_msg.c); this many at most, a memory bound. */
#define UCT_SYNCMEM_CM_TOMBS    4096
/* REQs kept for room, per CM_MAX_HALF_OPEN (uct_syncmem_cm_defer) */
#define UCT_SYNCMEM_CM_DEFER_FACTOR 8
/* A REQ answered BUSY is not counted against CM_RETRIES, up to this many
 * times CM_RETRIES: a target that answers is alive and takes the REQ once
 * it has room, but one that never has room must not hold an endpoint
 * forever. */
#define UCT_SYNCMEM_CM_BUSY_FACTOR  8
#define UCT_SYNCMEM_QPN_MAX     0xffffffu   /* QP numbers are 24 bits */

enum {
    UCT_SYNCMEM_CM_REQ  = 1,
    UCT_SYNCMEM_CM_REP  = 2,
    UCT_SYNCMEM_CM_DREQ = 3,
    UCT_SYNCMEM_CM_RTU  = 4, /* ready to use: the initiator's QP is at RTS */
    UCT_SYNCMEM_CM_GONE = 5, /* the target's iface closes: its connections
                                are gone for good, reconnecting is futile */
    UCT_SYNCMEM_CM_BUSY = 6  /* REQ refused for room: alive, ask again */
};

/* REQ of a reconnect: the initiator kept the QP the passive QP is
 * connected to, and resumes it if the passive QP is still up. REP: it is;
 * rc_qpn is the same passive QP as before. */
#define UCT_SYNCMEM_CM_F_RESUME   UCS_BIT(0)
/* REP of a reconnect onto a new passive QP: old_qpn, the passive QP it
 * replaces, was stopped (uct_syncmem_qp_stop) with its responder expecting
 * old_rq_psn next. The initiator's requests below it ran, the others never
 * will (syncmem_reconnect.c). */
#define UCT_SYNCMEM_CM_F_RQ_PSN   UCS_BIT(1)
/* REQ: the initiator sends an RTU once its QP is ready. REP: the target
 * wants it (a target that knows no RTU never asks). The target probes the
 * connection on the RTU, not before: a keepalive write that reaches a QP
 * not yet at RTR is retried after the RC timeout, and fails if that is
 * short and the initiator slow (a connection storm). */
#define UCT_SYNCMEM_CM_F_RTU      UCS_BIT(2)
/* REQ: the initiator knows wire version 3's GONE and BUSY (an older one
 * would count them malformed). A target whose iface closes sends one GONE
 * to each such initiator, so that its endpoint fails at the first failed
 * request instead of trying to reconnect for RECONNECT_TIMEOUT (best
 * effort: a process that is killed sends nothing, and is found by the
 * reconnect's deadline). A target that refuses a REQ for room answers
 * BUSY, so that the try is not counted against CM_RETRIES. */
#define UCT_SYNCMEM_CM_F_V3       UCS_BIT(3)

typedef struct UCS_S_PACKED uct_syncmem_cm_msg {
    uint8_t                type;
    uint32_t               src_cm_qpn;   /* where to answer */
    uint32_t               rc_qpn;       /* sender's RC QP (REQ, REP) */
    uint64_t               src_iface_id;
    uint64_t               dst_iface_id; /* a stale address is refused */
    uint64_t               conn_id;      /* chosen by the initiator */
    uint16_t               gen;          /* of the initiator's RC QP */
    uct_syncmem_dev_addr_t src_dev;
    uint8_t                flags;        /* UCT_SYNCMEM_CM_F_* */
    /* since wire version 2; a version 1 message ends here */
    uint32_t               old_qpn;      /* REP with F_RQ_PSN */
    uint32_t               old_rq_psn;
} uct_syncmem_cm_msg_t;

/* A version 1 peer's messages are this long (after the GRH); ours, which
 * such a peer reads as far as it knows, are sizeof(uct_syncmem_cm_msg_t). */
#define UCT_SYNCMEM_CM_MSG_V1_LEN  ucs_offsetof(uct_syncmem_cm_msg_t, old_qpn)

/* syncmem_cm_ud.c: the UD QP, its CQ (the passive QPs' too) and slots */
ucs_status_t uct_syncmem_cm_ud_open(uct_syncmem_iface_t *iface);
void uct_syncmem_cm_ud_close(uct_syncmem_iface_t *iface);
void *uct_syncmem_cm_slot(uct_syncmem_iface_t *iface, unsigned slot);
ucs_status_t uct_syncmem_cm_post_recv(uct_syncmem_iface_t *iface,
                                      unsigned slot);
/* Sends msg to the CM QP qpn at peer; dropped if the send queue is full
 * (every message is sent again, or best effort). */
void uct_syncmem_cm_send(uct_syncmem_iface_t *iface,
                         const uct_syncmem_port_t *peer, uint32_t qpn,
                         const uct_syncmem_cm_msg_t *msg);
void uct_syncmem_cm_sends_wait(uct_syncmem_iface_t *iface, unsigned max,
                               ucs_time_t deadline);
void uct_syncmem_cm_qp_recover(uct_syncmem_iface_t *iface);

/* The passive side of one connection, owned by the target iface. It is
 * half-open until a keepalive write has reached the initiator's QP: only
 * then is there proof that someone holds the other end. */
typedef struct uct_syncmem_cm_passive {
    ucs_list_link_t list;
    uint64_t        peer_iface_id;
    uint64_t        conn_id;
    uint32_t        peer_cm_qpn;
    uint32_t        qpn;         /* qp->qp_num: the tables use only this */
    uint16_t        gen;
    uint8_t         probing;     /* a keepalive write is in flight */
    uint8_t         confirmed;   /* a keepalive write reached the peer */
    uint8_t         resumed;     /* this generation kept the same QP */
    uint8_t         stopped;     /* ...or replaced old_qpn, stopped at */
    uint8_t         rtu;         /* its initiator sends an RTU... */
    uint8_t         ready;       /* ...which came: probing is safe */
    uint8_t         gone;        /* its initiator knows GONE (F_V3)... */
    uct_syncmem_port_t peer;     /* ...and is there, when the iface closes */
    ucs_time_t      accepted;    /* when its QP was made */
    uint32_t        old_qpn;
    uint32_t        old_rq_psn;  /* ...this PSN: its REP says so */
    struct ibv_qp   *qp;
} uct_syncmem_cm_passive_t;

/* A passive QP the keepalive released: a reconnect may still come for it,
 * and its receive path must then know which QP the new one replaces. */
typedef struct uct_syncmem_cm_tomb {
    struct uct_syncmem_cm_tomb *next;
    uint64_t                   peer_iface_id;
    uint64_t                   conn_id;
    uint32_t                   qpn;
    ucs_time_t                 released;
} uct_syncmem_cm_tomb_t;

/* ep->cm.rep: the REP of this generation, noted by the async handler and
 * taken once by progress, which raises it as the endpoint's REP event.
 * Back to NONE with each REQ of a new generation. */
enum {
    UCT_SYNCMEM_CM_REP_NONE,     /* none yet: one is believed */
    UCT_SYNCMEM_CM_REP_NEW_QP,   /* in: the peer made a new passive QP */
    UCT_SYNCMEM_CM_REP_RESUMED,  /* in: the peer kept the same passive QP */
    UCT_SYNCMEM_CM_REP_TAKEN     /* raised; more are duplicates */
};

/* What a received message asks of the iface. */
typedef enum {
    UCT_SYNCMEM_CM_DROP,     /* nothing: stale, duplicate, or not ours */
    UCT_SYNCMEM_CM_ACCEPT,   /* REQ: a new connection, make a passive QP */
    UCT_SYNCMEM_CM_REFUSE,   /* REQ: a new connection, too many half-open */
    UCT_SYNCMEM_CM_ANSWER,   /* REQ again: send the same REP */
    UCT_SYNCMEM_CM_REPLACE,  /* REQ of a later generation: a new QP */
    UCT_SYNCMEM_CM_REPLIED,  /* REP for an endpoint that is connecting */
    UCT_SYNCMEM_CM_RELEASE,  /* DREQ: the initiator closed its endpoint */
    UCT_SYNCMEM_CM_PROBE,    /* RTU: probe the half-open connection now */
    UCT_SYNCMEM_CM_PEER_GONE, /* GONE for an endpoint of ours */
    UCT_SYNCMEM_CM_PEER_BUSY  /* BUSY for one of ours that connects */
} uct_syncmem_cm_action_t;

/* A message from this iface (flags 0). */
void uct_syncmem_cm_msg_init(uct_syncmem_iface_t *iface, uint8_t type,
                             uint64_t dst_iface_id, uint64_t conn_id,
                             uint16_t gen, uint32_t rc_qpn,
                             uct_syncmem_cm_msg_t *msg);

/* Checks a received UD message (buf: after the GRH, byte_len: with it;
 * src_qp: the sender's QP number as the HCA reports it). */
ucs_status_t uct_syncmem_cm_msg_parse(const uct_syncmem_iface_t *iface,
                                      const void *buf, uint32_t byte_len,
                                      uint32_t src_qp,
                                      uct_syncmem_cm_msg_t *msg,
                                      uct_syncmem_port_t *peer);

uct_syncmem_cm_action_t uct_syncmem_cm_decide(uct_syncmem_iface_t *iface,
                                              const uct_syncmem_cm_msg_t *msg,
                                              uct_syncmem_cm_passive_t **p_p,
                                              uct_syncmem_ep_t **ep_p);

/* A REQ refused for room, kept to be accepted once there is some. */
typedef struct uct_syncmem_cm_deferred {
    uct_syncmem_cm_msg_t msg;
    uct_syncmem_port_t   peer;
} uct_syncmem_cm_deferred_t;

/* Keeps a refused REQ (or updates the one kept of its connection); 0 if
 * there is no room for it either (CM_MAX_HALF_OPEN / 2 are kept). */
int uct_syncmem_cm_defer(uct_syncmem_iface_t *iface,
                         const uct_syncmem_cm_msg_t *msg,
                         const uct_syncmem_port_t *peer);

/* Says what the handshake dropped, at most once a second (async context). */
int uct_syncmem_cm_flood_report(uct_syncmem_cm_flood_t *flood,
                                unsigned malformed, unsigned refused,
                                unsigned confirmed, ucs_time_t now,
                                ucs_time_t retry_span);
void uct_syncmem_cm_drops_report(uct_syncmem_iface_t *iface);

/* Table updates, called once the verbs part has done its share. */
void uct_syncmem_cm_passive_insert(uct_syncmem_iface_t *iface,
                                   uct_syncmem_cm_passive_t *p,
                                   const uct_syncmem_cm_msg_t *msg);
void uct_syncmem_cm_passive_replaced(uct_syncmem_iface_t *iface,
                                     uct_syncmem_cm_passive_t *p,
                                     const uct_syncmem_cm_msg_t *msg,
                                     uint32_t new_qpn);
void uct_syncmem_cm_passive_remove(uct_syncmem_iface_t *iface,
                                   uct_syncmem_cm_passive_t *p, int keep);
void uct_syncmem_cm_replied(uct_syncmem_ep_t *ep,
                            const uct_syncmem_cm_msg_t *msg);
/* A keepalive write on QP qpn completed; returns the passive connection to
 * release (its peer is gone), or NULL. */
uct_syncmem_cm_passive_t *uct_syncmem_cm_probe_done(uct_syncmem_iface_t *iface,
                                                    uint32_t qpn, int ok);
void uct_syncmem_cm_tombs_free(uct_syncmem_iface_t *iface);

#endif
