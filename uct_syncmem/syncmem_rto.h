/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - the RC timeout that adapts (UCX_SYNCMEM_RC_TIMEOUT=auto): the
 * shape of TCP's retransmission timeout (RFC 6298) on the round trips an
 * iface measures, quantised to the IB local ACK timeout, 4.096 us * 2^N.
 * Pure: no verbs, no clock; the iface feeds it samples in seconds and
 * programs the exponent it answers (syncmem_qp.c, syncmem_watchdog.c).
 */
#ifndef UCT_SYNCMEM_RTO_H_
#define UCT_SYNCMEM_RTO_H_

#include <stdint.h>

/* The IB timeout's unit: the ack timeout is 4.096 us * 2^N, N in 1..31
 * (0 is "wait forever", never programmed). */
#define UCT_SYNCMEM_RTO_TICK       4.096e-6

/*
 * 'auto' keeps the exponent within these. 67 ms (2^14), the fixed default
 * it replaces, is the least: a dead link on a quiet host is found as fast
 * as before (7 tries on Soft-RoCE: 0.47 s), never slower, and not faster
 * either: with 16.8 ms (2^12), a sender waiting on RNR NAKs for seconds
 * (a receiver that posted no buffers) had a request fail before its stall
 * time on a busy emulated guest (Linux 6.12), most likely past its retries
 * (doc/design.md), which 67 ms never did. 2.1 s (2^19) is rc_verbs' 1 s
 * doubled once, where 24 oversubscribed MPI ranks stopped retransmitting.
 * Before any sample a QP gets the least.
 */
#define UCT_SYNCMEM_RTO_EXP_MIN    14
#define UCT_SYNCMEM_RTO_EXP_MAX    19
#define UCT_SYNCMEM_RTO_EXP_INIT   14

/* RFC 6298's K: the timeout is the smoothed round trip and K variances. */
#define UCT_SYNCMEM_RTO_K          4

/* The estimate of one iface (one port): its round trips smoothed, and the
 * exponent it gives QPs now. */
typedef struct uct_syncmem_rto {
    double   srtt;     /* seconds; valid once samples > 0 */
    double   rttvar;   /* seconds */
    double   last;     /* the last sample, seconds (for the log) */
    uint64_t samples;
    uint8_t  exp;      /* the exponent QPs get now */
    uint8_t  exp_min;
    uint8_t  exp_max;
} uct_syncmem_rto_t;

#ifdef __cplusplus
extern "C" {
#endif

/* The IB timeout exponent of a time in seconds: rounded up, 1..31. */
uint8_t uct_syncmem_rto_exp_of(double seconds);

/* The time of an exponent, seconds. */
double uct_syncmem_rto_exp_sec(uint8_t exp);

/* An estimate with no sample yet: exp_init until the first, clamped to
 * exp_min..exp_max. */
void uct_syncmem_rto_init(uct_syncmem_rto_t *rto, uint8_t exp_min,
                          uint8_t exp_max, uint8_t exp_init);

/*
 * A round trip (seconds) measured: SRTT and RTTVAR as RFC 6298 2.2 and 2.3
 * (the first sets SRTT to it, RTTVAR to half of it; then RTTVAR takes a
 * quarter of |SRTT - R| and SRTT an eighth of R). The exponent follows the
 * timeout SRTT + K * RTTVAR: the first sets it, then up as soon as that
 * needs a longer step, down (to the step it needs) only once it fits twice
 * in the step below (no back and forth at a step's edge: each change costs
 * a modify of every QP that samples). Answers 1 when the exponent changed.
 */
int uct_syncmem_rto_sample(uct_syncmem_rto_t *rto, double rtt);

/* The timeout the estimate asks for now, seconds, before quantisation and
 * bounds: SRTT + K * RTTVAR (the initial exponent's time before any
 * sample). */
double uct_syncmem_rto_value(const uct_syncmem_rto_t *rto);

/* The exponent of a QP whose endpoint's requests failed backoff times in a
 * row (RC retries exceeded, or a stall) since its last sample: doubled for
 * each, as RFC 6298 5.5, up to the bound. */
uint8_t uct_syncmem_rto_backoff_exp(const uct_syncmem_rto_t *rto,
                                    unsigned backoff);

/* Backoffs past which the exponent no longer grows (the count is kept
 * below it). */
unsigned uct_syncmem_rto_backoff_max(const uct_syncmem_rto_t *rto);

#ifdef __cplusplus
}
#endif

#endif
