/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * scale_run.h: one N's run of the scale bench, what both of its parts work
 * on: scale.c (the endpoints, the cost rows) and scale_flap.c (a verified
 * stream over all of them, for the fault bench). The run's options, its
 * result, its state, and the helpers both call (scale_run.c).
 */
#ifndef SCALE_RUN_H
#define SCALE_RUN_H

#include <uct/api/uct.h>
#include <ucs/async/async.h>

#include <math.h>

#define SCALE_MAX_N  64

typedef struct {
    const char    *tl, *name, *dev[2];  /* dev: the client's, the peer's */
    unsigned      n[SCALE_MAX_N], n_count, rep, lat_samples;
    unsigned long rate_ops;
    double        rate_sec, wait_sec;
    double        idle_sec;             /* -i: the idle phase */
    double        flap_sec;             /* -F: the stream of scale_flap.c */
    const char    *flag;                /* -f: created once it streams */
} scale_opts_t;

/* What a child measured; nan what it could not */
typedef struct {
    double rss_kb, rss_traffic_kb, heap_kb, connect_ms, lat_med_us,
           lat_p99_us, rate_ops, rss_idle_kb, heap_idle_kb;
    char   note[400];
} scale_result_t;

#define SCALE_RESULT_NONE  { NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, "" }

typedef struct scale scale_t;

typedef struct {
    uct_completion_t super;
    scale_t          *s;
} scale_comp_t;

/* One N's run: side 0 is the client, 1 the peer */
struct scale {
    const scale_opts_t  *opts;
    scale_result_t      *res;
    ucs_async_context_t *async;
    uct_worker_h        worker[2];
    uct_component_h     component[2];
    uct_md_h            md[2];
    uct_iface_h         iface[2];
    uct_iface_attr_t    attr[2];
    void                *target;      /* the peer's memory the puts write */
    size_t              target_len;
    uct_mem_h           memh;
    uct_rkey_bundle_t   rkey;
    unsigned            n;
    uct_ep_h            *eps, *peer_eps;
    scale_comp_t        *comps;
    unsigned            done;         /* flushes completed */
    ucs_status_t        comp_status;  /* the first that failed */
    ucs_status_t        ep_status;    /* the iface's error handler's first */
};

/* Monotonic seconds */
double now_sec(void);
/* Says why in the row's note (the first reason stays); -1 */
int scale_fail(scale_t *s, const char *fmt, ...);

#endif
