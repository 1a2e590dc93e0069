/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - the RC timeout estimate (RFC 6298's shape, IB's steps); see
 * syncmem_rto.h.
 */
#include "syncmem_rto.h"

#include <math.h>


static uint8_t uct_syncmem_rto_clamp(const uct_syncmem_rto_t *rto, int exp)
{
    if (exp < rto->exp_min) {
        return rto->exp_min;
    }
    return (exp > rto->exp_max) ? rto->exp_max : (uint8_t)exp;
}

/* ceil(log2(seconds / tick)), unclamped: 0 for anything up to one tick */
static int uct_syncmem_rto_steps(double seconds)
{
    double steps;

    if (!(seconds > UCT_SYNCMEM_RTO_TICK)) { /* NaN too */
        return 0;
    }
    steps = ceil(log2(seconds / UCT_SYNCMEM_RTO_TICK));
    return (steps > 64) ? 64 : (int)steps;
}

uint8_t uct_syncmem_rto_exp_of(double seconds)
{
    int steps = uct_syncmem_rto_steps(seconds);

    return (steps < 1) ? 1 : (steps > 31) ? 31 : (uint8_t)steps;
}

double uct_syncmem_rto_exp_sec(uint8_t exp)
{
    return UCT_SYNCMEM_RTO_TICK * (double)(1ull << exp);
}

void uct_syncmem_rto_init(uct_syncmem_rto_t *rto, uint8_t exp_min,
                          uint8_t exp_max, uint8_t exp_init)
{
    rto->srtt    = 0;
    rto->rttvar  = 0;
    rto->last    = 0;
    rto->samples = 0;
    rto->exp_min = (exp_min < 1) ? 1 : exp_min;
    rto->exp_max = (exp_max > 31) ? 31 : exp_max;
    if (rto->exp_max < rto->exp_min) {
        rto->exp_max = rto->exp_min;
    }
    rto->exp     = uct_syncmem_rto_clamp(rto, exp_init);
}

double uct_syncmem_rto_value(const uct_syncmem_rto_t *rto)
{
    if (rto->samples == 0) {
        return uct_syncmem_rto_exp_sec(rto->exp);
    }
    return rto->srtt + UCT_SYNCMEM_RTO_K * rto->rttvar;
}

int uct_syncmem_rto_sample(uct_syncmem_rto_t *rto, double rtt)
{
    uint8_t old = rto->exp;
    double value;
    int steps;

    if (!(rtt >= 0)) {
        return 0; /* NaN or a clock that went back: no sample */
    }
    rto->last = rtt;
    if (rto->samples++ == 0) {
        rto->srtt   = rtt;
        rto->rttvar = rtt / 2;
    } else {
        rto->rttvar = 0.75 * rto->rttvar + 0.25 * fabs(rto->srtt - rtt);
        rto->srtt   = 0.875 * rto->srtt + 0.125 * rtt;
    }

    /* most samples move neither way: two compares, no log2; the first
     * replaces the initial exponent, which nothing measured */
    value = uct_syncmem_rto_value(rto);
    if (rto->samples == 1) {
        rto->exp = uct_syncmem_rto_clamp(rto,
                                         uct_syncmem_rto_steps(value));
        return rto->exp != old;
    }
    if ((value <= uct_syncmem_rto_exp_sec(rto->exp)) &&
        ((rto->exp <= rto->exp_min) ||
         (value > uct_syncmem_rto_exp_sec(rto->exp - 2)))) {
        return 0;
    }
    steps = uct_syncmem_rto_steps(value);
    if (steps > rto->exp) {
        rto->exp = uct_syncmem_rto_clamp(rto, steps);
    } else if (steps + 1 < rto->exp) {
        /* fits twice in the step below: to the step it needs (rising back
         * takes twice the timeout that brought it here) */
        rto->exp = uct_syncmem_rto_clamp(rto, steps);
    }
    return rto->exp != old;
}

unsigned uct_syncmem_rto_backoff_max(const uct_syncmem_rto_t *rto)
{
    return rto->exp_max - rto->exp_min;
}

uint8_t uct_syncmem_rto_backoff_exp(const uct_syncmem_rto_t *rto,
                                    unsigned backoff)
{
    if (backoff > uct_syncmem_rto_backoff_max(rto)) {
        backoff = uct_syncmem_rto_backoff_max(rto);
    }
    return uct_syncmem_rto_clamp(rto, rto->exp + (int)backoff);
}
