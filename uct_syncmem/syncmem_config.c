/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - the transport's settings (UCX_SYNCMEM_*): the iface
 * configuration table, kept apart from the iface code that reads it. The
 * man page's settings section is generated from it
 * (contrib/tools/gen-manpage.sh).
 */
#include "syncmem_iface.h"


/*
 * RC_TIMEOUT and RC_RETRY_COUNT have the names UCX's rc transports read
 * with the RC_ prefix (rc_iface.c: UCX_RC_TIMEOUT, UCX_RC_RETRY_COUNT), so
 * that what a user or UCX's own tests set for rc applies here too. They
 * are a table embedded with an empty prefix, the way every transport
 * embeds UCX's uct_iface_config_table: UCX's parser reads each field as
 * UCX_<NAME> first and UCX_SYNCMEM_<NAME> over it, honouring the
 * environment prefix UCP was given and the configuration files alike, so
 * syncmem's own wins where both are set. ucx_info prints them as
 * inheriting UCX_RC_*.
 */
ucs_config_field_t uct_syncmem_rc_config_table[] = {
    {"RC_TIMEOUT", "auto",
     "RC transport timeout: how long the HCA waits for an acknowledgement\n"
     "before retransmitting (rounded up to 4.096us * 2^N). 'auto' measures\n"
     "it: the round trips of the iface's requests smoothed, plus four times\n"
     "their variance (TCP's retransmission timeout, RFC 6298), between\n"
     "67 ms (the fixed default before it) and 2.1 s; doubled for an endpoint's\n"
     "next QP each time its requests exceed their retries or stall, until\n"
     "they get through again. A QP takes it when it connects, and again\n"
     "while connected where the device allows it (the log says, at diag\n"
     "level, when it changes and where it is refused). A time fixes it:\n"
     "67ms was the default before 'auto', 1s is rc_verbs'. Unset, UCX's\n"
     "UCX_RC_TIMEOUT (the rc transports' setting) applies where it is set;\n"
     "UCX_SYNCMEM_RC_TIMEOUT wins over it.",
     ucs_offsetof(uct_syncmem_rc_config_t, timeout),
     UCS_CONFIG_TYPE_TIME_UNITS},

    {"RC_RETRY_COUNT", "7",
     "RC retransmissions before an operation fails with\n"
     "UCS_ERR_ENDPOINT_TIMEOUT (0..7): a dead peer is found after about\n"
     "RC_TIMEOUT * (RC_RETRY_COUNT + 1) while requests are in flight (and\n"
     "then RECONNECT_TIMEOUT, with RECONNECT). Soft-RoCE (rdma_rxe) retries\n"
     "forever when given 7, so there 7 is programmed as 6. Unset, UCX's\n"
     "UCX_RC_RETRY_COUNT applies where it is set; UCX_SYNCMEM_RC_RETRY_COUNT\n"
     "wins over it.",
     ucs_offsetof(uct_syncmem_rc_config_t, retry_count), UCS_CONFIG_TYPE_UINT},

    {NULL}
};

/*
 * The IB specification makes only an RNR retry count of 7 infinite; an RC
 * retry count of 7 is 7 retries, and HCAs (mlx5) fail the request after
 * them. Soft-RoCE's completer skips the decrement at 7 (rxe_comp.c,
 * COMPST_ERROR_RETRY: "if (qp->comp.retry_cnt != 7) qp->comp.retry_cnt--",
 * kernels 6.1 and 6.12 alike), so a request to a peer whose QP is gone is
 * sent again forever, never fails with IBV_WC_RETRY_EXC_ERR, and only the
 * stall check (RC_STALL_TIMEOUT) ever finds it. UCX's rc transports program
 * 7 (their default) on Soft-RoCE as on any device; syncmem programs the
 * largest count that ends.
 */
unsigned uct_syncmem_config_rc_retry_count(unsigned requested,
                                           int seven_is_infinite)
{
    return (seven_is_infinite && (requested >= 7)) ? 6 : requested;
}

ucs_config_field_t uct_syncmem_iface_config_table[] = {
    {"", "", NULL, ucs_offsetof(uct_syncmem_iface_config_t, super),
     UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},

    {"GID_INDEX", "auto",
     "RoCE GID table index used for traffic. 'auto' picks a RoCE v2 GID with\n"
     "an IPv4-mapped address, then any RoCE v2 GID, then any GID. Ignored on\n"
     "InfiniBand, which routes by LID. See 'show_gids' for the table.",
     ucs_offsetof(uct_syncmem_iface_config_t, gid_index),
     UCS_CONFIG_TYPE_ULUNITS},

    {"MTU", "auto",
     "Largest path MTU in bytes (256, 512, 1024, 2048 or 4096). 'auto' uses\n"
     "the port's active MTU. Peers use the smaller of their two values.",
     ucs_offsetof(uct_syncmem_iface_config_t, mtu), UCS_CONFIG_TYPE_ULUNITS},

    {"RX_QUEUE_LEN", "1024",
     "Receive buffers (of SEG_SIZE bytes) shared by all endpoints of an iface\n"
     "for active messages. When they run out, senders wait in hardware (RNR\n"
     "retry) until progress refills them; nothing is lost.",
     ucs_offsetof(uct_syncmem_iface_config_t, rx_queue_len),
     UCS_CONFIG_TYPE_UINT},

    {"TX_QUEUE_LEN", "255",
     "Length of the send queue of each endpoint's QP, in work requests. One\n"
     "is kept for the drain of a failing endpoint (and with VERIFY one for a\n"
     "put's read-back); the rest is how many operations an endpoint may have\n"
     "outstanding before it answers UCS_ERR_NO_RESOURCE. The queue is memory\n"
     "the kernel maps, and devices round it up to a power of 2 (Soft-RoCE\n"
     "first adds one slot of its own): 255 fills 256 slots on both, where\n"
     "256 takes 512 on Soft-RoCE.",
     ucs_offsetof(uct_syncmem_iface_config_t, tx_queue_len),
     UCS_CONFIG_TYPE_UINT},

    {"TX_RING_MIN", "2",
     "Requests an endpoint keeps for a reconnect (RECONNECT=y, or TX_DB_BATCH\n"
     "above 1) before its replay ring grows: each costs 24 bytes plus\n"
     "TX_MAX_INLINE. The ring doubles while more are outstanding, up to\n"
     "TX_QUEUE_LEN. An endpoint that posted nothing through two watchdog\n"
     "checks gives its ring back (see also TX_IDLE_RINGS), and its next\n"
     "operation takes one again.\n"
     "Larger: fewer pauses (UCS_ERR_NO_RESOURCE until the next progress grows\n"
     "it) when traffic starts; smaller: less memory per endpoint.",
     ucs_offsetof(uct_syncmem_iface_config_t, tx_ring_min),
     UCS_CONFIG_TYPE_UINT},

    {"TX_IDLE_RINGS", "16",
     "Replay rings (see TX_RING_MIN) an iface's endpoints keep while they\n"
     "have nothing outstanding. While more endpoints than this hold a ring,\n"
     "one whose last request completes gives its ring back at once, and its\n"
     "next operation takes one again (a malloc); the others keep theirs\n"
     "until two watchdog checks pass without a send.\n"
     "Larger: fewer mallocs when many endpoints send in turn; smaller: less\n"
     "memory per endpoint when many have sent once.",
     ucs_offsetof(uct_syncmem_iface_config_t, tx_idle_rings),
     UCS_CONFIG_TYPE_UINT},

    {"TX_CQ_LEN", "4096",
     "Size of the send completion queue shared by all endpoints of an iface:\n"
     "operations the iface may have outstanding in all.",
     ucs_offsetof(uct_syncmem_iface_config_t, tx_cq_len), UCS_CONFIG_TYPE_UINT},

    {"TX_MODERATION", "64",
     "Ask for a completion at least every this many sends, even when nobody\n"
     "waits for one; fewer completions cost less CPU, but send queue slots\n"
     "come back later. Capped at a quarter of TX_QUEUE_LEN, rounded up.",
     ucs_offsetof(uct_syncmem_iface_config_t, tx_moderation),
     UCS_CONFIG_TYPE_UINT},

    {"TX_MAX_INLINE", "128",
     "Largest put_short, copied into the work request by the CPU (no DMA\n"
     "read of the source). At most 256 (the smallest path MTU: a short\n"
     "request is one packet); the device may grant less. ucx_info shows the\n"
     "result as put 'short' size.",
     ucs_offsetof(uct_syncmem_iface_config_t, tx_max_inline),
     UCS_CONFIG_TYPE_MEMUNITS},

    {"TX_DB_BATCH", "1",
     "Requests posted to the device with one doorbell. The first request\n"
     "after a progress is posted at once; those that follow it are kept until\n"
     "this many have gathered, the endpoint or the completion queue runs out\n"
     "of room, or the next progress, flush or check, whichever comes first,\n"
     "then posted as one chain (on Soft-RoCE one system call instead of one\n"
     "per request). 1 (the default) posts every request at once. Above 1 a\n"
     "request sent right after another is on the wire only once its worker is\n"
     "progressed again: only for callers that do so (OpenSHMEM's finalize,\n"
     "which sends on one worker and then waits on another, hangs).",
     ucs_offsetof(uct_syncmem_iface_config_t, tx_db_batch),
     UCS_CONFIG_TYPE_UINT},

    {"AMO_GUESS_WORDS", "1024",
     "Remote 64-bit words an iface remembers for its emulated atomics (and,\n"
     "or, xor, swap, their fetching forms, every 32-bit one): each is a\n"
     "compare-and-swap that guesses what the word holds, done in one round\n"
     "trip if right and two if not. The guess is the value last seen at the\n"
     "word (moved on by what this iface has sent to it since), from a table\n"
     "of this many words (rounded up to a power of 2; 40 bytes each, made at\n"
     "the first emulated atomic); a word not in it is guessed 0. 0: no table,\n"
     "every guess 0 (two round trips on any word that is not 0).",
     ucs_offsetof(uct_syncmem_iface_config_t, amo_guess_words),
     UCS_CONFIG_TYPE_UINT},

    {"TX_MAX_SGE", "6",
     "Largest number of iov entries in one zero-copy put or get (also capped\n"
     "by the device, and at 32).",
     ucs_offsetof(uct_syncmem_iface_config_t, tx_max_sge), UCS_CONFIG_TYPE_UINT},

    {"SEG_SIZE", "8k",
     "Size of the registered send and receive buffers: the largest bcopy\n"
     "operation and the largest active message.",
     ucs_offsetof(uct_syncmem_iface_config_t, seg_size),
     UCS_CONFIG_TYPE_MEMUNITS},

    {"CM_TIMEOUT", "300ms",
     "Time to wait for the peer's answer to a connection request before\n"
     "sending it again.",
     ucs_offsetof(uct_syncmem_iface_config_t, cm_timeout),
     UCS_CONFIG_TYPE_TIME_UNITS},

    {"CM_RETRIES", "20",
     "Connection requests sent again before an endpoint fails with\n"
     "UCS_ERR_ENDPOINT_TIMEOUT (after about CM_TIMEOUT * (CM_RETRIES + 1)).",
     ucs_offsetof(uct_syncmem_iface_config_t, cm_retries), UCS_CONFIG_TYPE_UINT},

    {"CM_MAX_HALF_OPEN", "256",
     "Connections this iface accepted whose initiator no keepalive write has\n"
     "reached yet (each holds a QP); one sender may hold at most half of them.\n"
     "Connection requests beyond that wait for room (8 times as many, one\n"
     "sender's at most half of them: about 100 bytes each, no QP), more are\n"
     "dropped (the initiator retries), and the half-open ones are\n"
     "checked at once, so that those with no peer behind them are released.\n"
     "Bounds what a flood of requests can take. Refusals are counted at diag\n"
     "level; a warning says when they go on, with no connection confirmed,\n"
     "for longer than a requester retries (CM_TIMEOUT x (CM_RETRIES + 1)).",
     ucs_offsetof(uct_syncmem_iface_config_t, cm_max_half_open),
     UCS_CONFIG_TYPE_UINT},

    {"KEEPALIVE_INTERVAL", "10s",
     "How often the target side of each connection checks that the endpoint\n"
     "at the other end still exists, with an empty RDMA write. The first\n"
     "write that fails (no acknowledgement after the RC retries,\n"
     "RC_TIMEOUT * (RC_RETRY_COUNT + 1)) releases the connection (its QP).\n"
     "This is what frees the connections of peers that died. 'inf' disables\n"
     "it.",
     ucs_offsetof(uct_syncmem_iface_config_t, keepalive_interval),
     UCS_CONFIG_TYPE_TIME_UNITS},

    {"", "", NULL, ucs_offsetof(uct_syncmem_iface_config_t, rc),
     UCS_CONFIG_TYPE_TABLE(uct_syncmem_rc_config_table)},

    {"RC_RNR_RETRY_COUNT", "7",
     "Retries when the receiver has no buffer posted (0..7, 7 is infinite).",
     ucs_offsetof(uct_syncmem_iface_config_t, rc_rnr_retry_count),
     UCS_CONFIG_TYPE_UINT},

    {"RECONNECT", "y",
     "When an endpoint's QP fails because packets stopped getting through\n"
     "(RC retries exceeded: a link, switch or port outage) or was moved to the\n"
     "error state, connect to the same peer again and post again what had\n"
     "not completed, instead of failing the endpoint: see RECONNECT_RESUME.\n"
     "Costs a copy of each request (and of inline data) per endpoint.",
     ucs_offsetof(uct_syncmem_iface_config_t, reconnect), UCS_CONFIG_TYPE_BOOL},

    {"RECONNECT_RESUME", "y",
     "With RECONNECT: when the peer's QP is still up (the usual case after a\n"
     "link outage), reset the failed QP and resume it where it stopped, with\n"
     "the same packet sequence numbers: the peer's RC responder recognises\n"
     "what it already executed, so every operation, atomics included, runs\n"
     "exactly once and none fails. Otherwise (or with 'n') a new QP is\n"
     "connected: puts and gets run again, active messages are delivered once,\n"
     "and an atomic that may have run already is not run again and completes\n"
     "with UCS_ERR_CONNECTION_RESET. A QP that RC_STALL_TIMEOUT found wedged,\n"
     "or a request that fails again after it was resumed, gets a new QP.",
     ucs_offsetof(uct_syncmem_iface_config_t, reconnect_resume),
     UCS_CONFIG_TYPE_BOOL},

    {"RECONNECT_TIMEOUT", "5s",
     "How long an endpoint tries to reconnect before it fails with\n"
     "UCS_ERR_ENDPOINT_TIMEOUT. A peer process that died is found only after\n"
     "this; one that closed its iface says so, and is not reconnected to.\n"
     "A reconnect that RC_STALL_TIMEOUT started tries at least as long as that\n"
     "stall was allowed: the peer answered late, and may be slow to answer the\n"
     "handshake too. 'inf': until it succeeds.",
     ucs_offsetof(uct_syncmem_iface_config_t, reconnect_timeout),
     UCS_CONFIG_TYPE_TIME_UNITS},

    {"RC_STALL_TIMEOUT", "auto",
     "An endpoint whose oldest operation has not completed\n"
     "for this long, while its QP sent nothing new (its send PSN did not\n"
     "advance), is taken for wedged: its QP is moved to the error state and\n"
     "replaced as after a link failure. This catches a device that stops\n"
     "retransmitting without reporting an error (seen on Soft-RoCE after a\n"
     "link flap). A receiver that posts no buffers for this long (RNR wait),\n"
     "or a single get that takes longer, looks the same: it costs a\n"
     "reconnect, nothing is lost, and the endpoint waits twice as long before\n"
     "the next one until that operation completes. At most 16 endpoints are\n"
     "taken for wedged at one check (a quarter of this time); many at once\n"
     "are a slow device, and the rest wait for the next. 'auto': 4 times the RC\n"
     "retry window (RC_TIMEOUT * (RC_RETRY_COUNT + 1)) of the endpoint's QP\n"
     "(with RC_TIMEOUT=auto, the one it measured), at least 2 s, with\n"
     "RECONNECT, for a minute after the port showed link trouble (a port\n"
     "event, a request past its retries or not routed), and 8 times that\n"
     "otherwise: the wedge follows a link flap, and without one a request\n"
     "that waits that long is one a busy device or receiver answers late (a\n"
     "new QP would fail the atomics that had run). Off without RECONNECT.\n"
     "Set without RECONNECT, a stall fails the endpoint (as the link failure\n"
     "it stands for would). 'inf': off.",
     ucs_offsetof(uct_syncmem_iface_config_t, stall_timeout),
     UCS_CONFIG_TYPE_TIME_UNITS},

    {"OP_TIMEOUT", "inf",
     "An operation (or flush) not completed after this long fails its\n"
     "endpoint with UCS_ERR_ENDPOINT_TIMEOUT, and every operation outstanding\n"
     "on it with that status, so that UCP can recover. 'inf': no deadline.",
     ucs_offsetof(uct_syncmem_iface_config_t, op_timeout),
     UCS_CONFIG_TYPE_TIME_UNITS},

    {"FAULT_QP_ERROR", "inf",
     "For testing recovery only: every this often, move the QP of every\n"
     "connected endpoint to the error state, as a broken link would.",
     ucs_offsetof(uct_syncmem_iface_config_t, fault_qp_error),
     UCS_CONFIG_TYPE_TIME_UNITS},

    {"VERIFY", "none",
     "Consistency check of the data moved:\n"
     " none - no check.\n"
     " crc  - active messages carry a CRC32C of their payload (4 bytes, so\n"
     "        the largest message is 4 bytes smaller), checked on receipt: a\n"
     "        message that does not match is dropped, counted and logged.\n"
     "        Each put is read back (RDMA READ of the same range, in SEG_SIZE\n"
     "        chunks) and compared by CRC32C with what was written; a mismatch\n"
     "        fails the put with UCS_ERR_IO_ERROR (its completion, or else its\n"
     "        endpoint). Cost: a CRC of every byte sent and received, and for\n"
     "        puts the data crosses the wire twice plus a round trip per\n"
     "        SEG_SIZE chunk (contrib/bench/verify-cost.sh measures it).\n"
     "A receiver checks every message that carries a CRC, whatever its own\n"
     "setting.",
     ucs_offsetof(uct_syncmem_iface_config_t, verify),
     UCS_CONFIG_TYPE_ENUM(uct_syncmem_verify_names)},

    {"VERIFY_INJECT", "0",
     "For testing: corrupt every Nth checked message or put on the side that\n"
     "checks it (the receiver of a message, the reader of a put), by flipping\n"
     "a byte before the check. 0 = never.",
     ucs_offsetof(uct_syncmem_iface_config_t, verify_inject),
     UCS_CONFIG_TYPE_UINT},

    /* Partition and quality of service: syncmem_device.c checks them,
     * syncmem_qp.c applies them to the RC QPs, the handshake's UD QP and
     * every address handle. */
    {"PKEY", "auto",
     "Partition (P_Key) of every QP, in hex: 0x0..0x7fff, the membership bit\n"
     "left out (0x7fff is the default partition). It is looked up in the\n"
     "port's P_Key table (/sys/class/infiniband/<dev>/ports/<port>/pkeys/),\n"
     "a full-membership entry first; a value not in the table is an error\n"
     "that lists the table. Both peers must use the same partition. 'auto'\n"
     "takes the first full-membership entry. On RoCE the table holds only\n"
     "the default 0xffff.",
     ucs_offsetof(uct_syncmem_iface_config_t, pkey), UCS_CONFIG_TYPE_HEX},

    {"SL", "0",
     "Service level of every connection, decimal (0..15). InfiniBand: the\n"
     "subnet manager maps it to a virtual lane. RoCE: the Ethernet priority\n"
     "(0..7), sent in the VLAN tag (PCP) when the netdev is a VLAN.",
     ucs_offsetof(uct_syncmem_iface_config_t, sl), UCS_CONFIG_TYPE_ULUNITS},

    {"TRAFFIC_CLASS", "0",
     "Traffic class of every connection, decimal (0..255). RoCE v2: the IP\n"
     "header's DSCP/ECN byte (DSCP in the top 6 bits: DSCP 46 is 184, DSCP\n"
     "26 is 104), which switches use for priority flow control and ECN\n"
     "marking.\n"
     "InfiniBand: the GRH traffic class, used only on routed traffic.",
     ucs_offsetof(uct_syncmem_iface_config_t, traffic_class),
     UCS_CONFIG_TYPE_ULUNITS},

    {NULL}
};
