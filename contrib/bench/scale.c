/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * scale: what an endpoint costs as one worker connects to many
 * (contrib/bench.sh, section 'scale'). One process, two UCT workers: a
 * client, whose iface connects N endpoints to a peer iface on the same or
 * another port, and that peer.
 *
 *   syncmem-run scale -t TL -d DEV:PORT [-D DEV:PORT] -n N[,N...] [-T NAME]
 *                     [-R REP] [-l SAMPLES] [-r OPS] [-s SEC] [-i SEC]
 *                     [-w SEC]
 *   scale -H          prints the CSV header
 *
 * TL connects to an iface (syncmem: N endpoints on the client, and the N
 * passive QPs the peer makes for them) or to an endpoint (rc_verbs: N
 * endpoint pairs joined with uct_ep_connect_to_ep). Both ends are in this
 * process: the memory is that of both ends of each connection. Each N runs
 * in a child process of its own, so that what one N freed is not reused by
 * the next, and a crash or a hang costs one row. Per N:
 *  - rss_kb_per_ep: resident memory (/proc/self/smaps_rollup) once every
 *    endpoint's first put completed, less that before the first endpoint
 *    was created, over N; rss_traffic_kb_per_ep: the same after the
 *    latency and rate phases (what is touched only as queues fill);
 *  - heap_kb_per_ep: what malloc handed out over the first span (mallinfo2:
 *    in use and mmapped, resident or not): the transport's, UCX's and the
 *    verbs provider's own allocations; the queues the kernel maps, and
 *    syncmem's replay rings of 16 KiB or more (mapped), are in RSS only;
 *  - connect_ms: from the first uct_ep_create to the first put (put_short
 *    of 8 bytes and a flush) completed on every endpoint, all at once;
 *  - lat_med_us, lat_p99_us: put_short of 8 bytes and a flush to
 *    completion, on each endpoint in turn, at least SAMPLES (default 2000);
 *  - rate_ops: put_short of 8 bytes round-robin over all N, OPS of them
 *    (default 100000) or as many as SEC seconds take (default 2), then a
 *    flush of every endpoint: operations per second;
 *  - rss_idle_kb_per_ep, heap_idle_kb_per_ep: resident and malloc'd as
 *    above, after -i seconds (default 3) in which both workers progress
 *    with nothing to send: what endpoints that stopped sending keep (a
 *    transport may give back what only traffic needs).
 * Output: a CSV line per N (its header: scale -H), then '# ' lines (the
 * largest N measured, where a list of N had one fail; what the devices
 * allow); NAME (default TL) is its transport, REP (default 1) its rep.
 * Every wait gives up after -w seconds (default 60) and says which one it
 * was; a row that could not be measured has nan for what it lacks and says
 * why in its note. Exit status 0 when every N was measured, 1 otherwise, 2
 * on a bad call.
 */
#include <uct/api/uct.h>
#include <ucs/async/async.h>
#include <infiniband/verbs.h>

#include <malloc.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "scale_run.h"
#include "scale_flap.h"

#define SCALE_HEADER "transport,n,rep,rss_kb_per_ep,rss_traffic_kb_per_ep," \
                     "heap_kb_per_ep,connect_ms,lat_med_us,lat_p99_us," \
                     "rate_ops,rss_idle_kb_per_ep,heap_idle_kb_per_ep,note"

/* Resident and malloc'd kB of this process. Resident as the kernel finds
 * it walking the page tables (smaps_rollup): statm's counters are cached
 * per thread and lag by up to 64 pages each, more than a few endpoints
 * take. */
static void scale_mem(double *rss, double *heap)
{
    struct mallinfo2 mi = mallinfo2();
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    double kb = NAN;

    while ((f != NULL) && (fgets(line, sizeof(line), f) != NULL)) {
        if (sscanf(line, "Rss: %lf kB", &kb) == 1) {
            break;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    *rss  = kb;
    *heap = (mi.uordblks + mi.hblkhd) / 1024.0;
}

static void scale_comp_cb(uct_completion_t *self)
{
    scale_t *s = ucs_container_of(self, scale_comp_t, super)->s;

    ++s->done;
    if ((self->status != UCS_OK) && (s->comp_status == UCS_OK)) {
        s->comp_status = self->status;
    }
}

static ucs_status_t scale_err_handler(void *arg, uct_ep_h ep,
                                      ucs_status_t status)
{
    scale_t *s = arg;

    if (s->ep_status == UCS_OK) {
        s->ep_status = status;
    }
    return UCS_OK;
}

/* Progresses both workers; -1 (and the note) once an endpoint or a flush
 * failed or WHAT, waited for since START, passed its bound (COUNTED: it
 * says how many endpoints were done) */
static int scale_progress(scale_t *s, double start, const char *what,
                          int counted)
{
    uct_worker_progress(s->worker[0]);
    uct_worker_progress(s->worker[1]);
    if (s->ep_status != UCS_OK) {
        return scale_fail(s, "%s: an endpoint failed: %s", what,
                          ucs_status_string(s->ep_status));
    } else if (s->comp_status != UCS_OK) {
        return scale_fail(s, "%s: a flush failed: %s", what,
                          ucs_status_string(s->comp_status));
    } else if (now_sec() - start <= s->opts->wait_sec) {
        return 0;
    } else if (counted) {
        return scale_fail(s, "%s: gave up waiting after %.0f s (%u of %u"
                          " endpoints done)", what, s->opts->wait_sec,
                          s->done, s->n);
    }
    return scale_fail(s, "%s: gave up waiting after %.0f s", what,
                      s->opts->wait_sec);
}

/* 1 if MD lists the transport on the device */
static int scale_md_has(uct_md_h md, const char *tl, const char *dev)
{
    uct_tl_resource_desc_t *tls;
    unsigned t, count;
    int found = 0;

    if (uct_md_query_tl_resources(md, &tls, &count) == UCS_OK) {
        for (t = 0; t < count; ++t) {
            found |= !strcmp(tls[t].tl_name, tl) &&
                     !strcmp(tls[t].dev_name, dev);
        }
        uct_release_tl_resource_list(tls);
    }
    return found;
}

/* Side i's md (the one named as its device that lists the transport there)
 * and its iface */
static int scale_open(scale_t *s, int i, uct_iface_params_t *params)
{
    const char *dev = s->opts->dev[i], *tl = s->opts->tl;
    uct_component_attr_t cattr;
    uct_iface_config_t *iconf;
    uct_component_h *comps;
    uct_md_config_t *mconf;
    char name[UCT_MD_NAME_MAX];
    unsigned c, m, count;

    snprintf(name, sizeof(name), "%.*s", (int)strcspn(dev, ":"), dev);
    if (uct_query_components(&comps, &count) != UCS_OK) {
        return scale_fail(s, "uct_query_components failed");
    }
    for (c = 0; (c < count) && (s->md[i] == NULL); ++c) {
        cattr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
        if (uct_component_query(comps[c], &cattr) != UCS_OK) {
            continue;
        }
        cattr.md_resources = calloc(cattr.md_resource_count + 1,
                                    sizeof(*cattr.md_resources));
        cattr.field_mask   = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
        if (uct_component_query(comps[c], &cattr) != UCS_OK) {
            cattr.md_resource_count = 0;
        }
        for (m = 0; (m < cattr.md_resource_count) && (s->md[i] == NULL); ++m) {
            if (strcmp(cattr.md_resources[m].md_name, name) ||
                (uct_md_config_read(comps[c], NULL, NULL, &mconf) != UCS_OK)) {
                continue;
            }
            if (uct_md_open(comps[c], name, mconf, &s->md[i]) != UCS_OK) {
                s->md[i] = NULL;
            } else if (scale_md_has(s->md[i], tl, dev)) {
                s->component[i] = comps[c];
            } else {
                uct_md_close(s->md[i]);
                s->md[i] = NULL;
            }
            uct_config_release(mconf);
        }
        free(cattr.md_resources);
    }
    uct_release_component_list(comps);
    if (s->md[i] == NULL) {
        return scale_fail(s, "no md %s lists %s on %s (is the port active?)",
                          name, tl, dev);
    } else if (uct_md_iface_config_read(s->md[i], tl, NULL, NULL,
                                        &iconf) != UCS_OK) {
        return scale_fail(s, "cannot read the configuration of %s", tl);
    }
    params->mode.device.dev_name = dev;
    if ((uct_iface_open(s->md[i], s->worker[i], params, iconf,
                        &s->iface[i]) != UCS_OK) ||
        (uct_iface_query(s->iface[i], &s->attr[i]) != UCS_OK)) {
        s->iface[i] = NULL;
    }
    uct_config_release(iconf);
    if (s->iface[i] == NULL) {
        return scale_fail(s, "cannot open a %s iface on %s", tl, dev);
    }
    uct_iface_progress_enable(s->iface[i], UCT_PROGRESS_SEND |
                                           UCT_PROGRESS_RECV);
    return 0;
}

/* Workers, ifaces, the peer's registered memory and its rkey */
static int scale_setup(scale_t *s)
{
    uct_iface_params_t params = {};
    uct_md_attr_t md_attr;
    void *packed;

    if ((ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK,
                                  &s->async) != UCS_OK) ||
        (uct_worker_create(s->async, UCS_THREAD_MODE_SINGLE,
                           &s->worker[0]) != UCS_OK) ||
        (uct_worker_create(s->async, UCS_THREAD_MODE_SINGLE,
                           &s->worker[1]) != UCS_OK)) {
        return scale_fail(s, "cannot create the workers");
    }
    params.field_mask          = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                 UCT_IFACE_PARAM_FIELD_DEVICE |
                                 UCT_IFACE_PARAM_FIELD_ERR_HANDLER |
                                 UCT_IFACE_PARAM_FIELD_ERR_HANDLER_ARG |
                                 UCT_IFACE_PARAM_FIELD_ERR_HANDLER_FLAGS;
    params.open_mode           = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name = s->opts->tl;
    params.err_handler         = scale_err_handler;
    params.err_handler_arg     = s;
    params.err_handler_flags   = 0;
    if ((scale_open(s, 0, &params) != 0) || (scale_open(s, 1, &params) != 0)) {
        return -1;
    }
    if (!(s->attr[0].cap.flags & UCT_IFACE_FLAG_PUT_SHORT) ||
        (s->attr[0].cap.put.max_short < sizeof(uint64_t)) ||
        !(s->attr[0].cap.flags & (UCT_IFACE_FLAG_CONNECT_TO_IFACE |
                                  UCT_IFACE_FLAG_CONNECT_TO_EP))) {
        return scale_fail(s, "%s has no put_short of 8 bytes, or connects"
                          " neither to an iface nor to an endpoint",
                          s->opts->tl);
    }

    if ((posix_memalign(&s->target, 4096, s->target_len) != 0) ||
        (uct_md_query(s->md[1], &md_attr) != UCS_OK)) {
        return scale_fail(s, "no memory for the target");
    }
    memset(s->target, 0, s->target_len);
    packed = alloca(md_attr.rkey_packed_size + 1);
    if ((uct_md_mem_reg(s->md[1], s->target, s->target_len,
                        UCT_MD_MEM_ACCESS_ALL,
                        &s->memh) != UCS_OK) ||
        (uct_md_mkey_pack(s->md[1], s->memh, packed) != UCS_OK) ||
        (uct_rkey_unpack(s->component[1], packed, &s->rkey) != UCS_OK)) {
        return scale_fail(s, "cannot register the target's memory");
    }
    return 0;
}

/* Endpoint i: to the peer's iface, or a pair joined endpoint to endpoint */
static ucs_status_t scale_ep_create(scale_t *s, unsigned i)
{
    uct_ep_params_t params = { .field_mask = UCT_EP_PARAM_FIELD_IFACE,
                               .iface      = s->iface[0] };
    uct_device_addr_t *dev[2];
    uct_ep_addr_t *epa[2];
    ucs_status_t status;
    int k;

    for (k = 0; k < 2; ++k) {
        dev[k] = alloca(s->attr[k].device_addr_len + 1);
        epa[k] = alloca(s->attr[k].ep_addr_len + 1);
        uct_iface_get_device_address(s->iface[k], dev[k]);
    }
    if (s->attr[0].cap.flags & UCT_IFACE_FLAG_CONNECT_TO_IFACE) {
        params.field_mask |= UCT_EP_PARAM_FIELD_DEV_ADDR |
                             UCT_EP_PARAM_FIELD_IFACE_ADDR;
        params.dev_addr    = dev[1];
        params.iface_addr  = alloca(s->attr[1].iface_addr_len + 1);
        uct_iface_get_address(s->iface[1],
                              (uct_iface_addr_t*)params.iface_addr);
        return uct_ep_create(&params, &s->eps[i]);
    }

    status = uct_ep_create(&params, &s->eps[i]);
    if (status != UCS_OK) {
        return status;
    }
    params.iface = s->iface[1];
    if (((status = uct_ep_create(&params, &s->peer_eps[i])) != UCS_OK) ||
        ((status = uct_ep_get_address(s->eps[i], epa[0])) != UCS_OK) ||
        ((status = uct_ep_get_address(s->peer_eps[i], epa[1])) != UCS_OK) ||
        ((status = uct_ep_connect_to_ep(s->eps[i], dev[1], epa[1])) !=
         UCS_OK)) {
        return status;
    }
    return uct_ep_connect_to_ep(s->peer_eps[i], dev[0], epa[0]);
}

static ucs_status_t scale_put(scale_t *s, unsigned i)
{
    uint64_t value = i;

    return uct_ep_put_short(s->eps[i], &value, sizeof(value),
                            (uintptr_t)s->target + 8 * (i % 512),
                            s->rkey.rkey);
}

/* Posts endpoint i's flush (one done at once is counted as done) */
static ucs_status_t scale_flush(scale_t *s, unsigned i)
{
    ucs_status_t status;

    s->comps[i].super.count  = 1;
    s->comps[i].super.status = UCS_OK;
    status = uct_ep_flush(s->eps[i], 0, &s->comps[i].super);
    s->done += (status == UCS_OK);
    return status;
}

/* Every endpoint at once, then the first put and flush on each as soon as
 * it takes them: connect_ms */
static int scale_connect(scale_t *s)
{
    double start = now_sec();
    ucs_status_t status;
    uint8_t *state;    /* 0: put to post, 1: flush to post, 2: flushing */
    unsigned i;
    int rc = 0;

    for (i = 0; i < s->n; ++i) {
        status = scale_ep_create(s, i);
        if (status != UCS_OK) {
            return scale_fail(s, "endpoint %u of %u not created: %s", i + 1,
                              s->n, ucs_status_string(status));
        }
    }
    state   = calloc(s->n, 1);
    s->done = 0;
    while ((s->done < s->n) && (rc == 0)) {
        for (i = 0; (i < s->n) && (rc == 0); ++i) {
            status = UCS_OK;
            if (state[i] == 0) {
                status    = scale_put(s, i);
                state[i] += (status == UCS_OK);
            }
            if (state[i] == 1) {
                status    = scale_flush(s, i);
                state[i] += (status == UCS_OK) || (status == UCS_INPROGRESS);
            }
            if (UCS_STATUS_IS_ERR(status) && (status != UCS_ERR_NO_RESOURCE)) {
                rc = scale_fail(s, "first put on endpoint %u: %s", i + 1,
                                ucs_status_string(status));
            }
        }
        rc = rc ? rc : scale_progress(s, start, "connecting", 1);
    }
    free(state);
    s->res->connect_ms = rc ? NAN : (now_sec() - start) * 1e3;
    return rc;
}

/* A put on endpoint i, retried while the endpoint has no room (the clock
 * read only then) */
static int scale_put_retry(scale_t *s, unsigned i, const char *what)
{
    ucs_status_t status = scale_put(s, i);
    double start;

    if (status == UCS_ERR_NO_RESOURCE) {
        start = now_sec();
        do {
            if (scale_progress(s, start, what, 0) != 0) {
                return -1;
            }
        } while ((status = scale_put(s, i)) == UCS_ERR_NO_RESOURCE);
    }
    return (status == UCS_OK) ? 0 :
           scale_fail(s, "%s on endpoint %u: %s", what, i + 1,
                      ucs_status_string(status));
}

/* Flushes endpoints FIRST.. FIRST + COUNT - 1 to completion */
static int scale_flush_wait(scale_t *s, unsigned first, unsigned count,
                            const char *what)
{
    double start = now_sec();
    ucs_status_t status;
    unsigned i = first;

    s->done = 0;
    while (i < first + count) {
        status = scale_flush(s, i);
        if (UCS_STATUS_IS_ERR(status) && (status != UCS_ERR_NO_RESOURCE)) {
            return scale_fail(s, "%s on endpoint %u: %s", what, i + 1,
                              ucs_status_string(status));
        }
        i += (status != UCS_ERR_NO_RESOURCE);
        if ((status == UCS_ERR_NO_RESOURCE) &&
            (scale_progress(s, start, what, 0) != 0)) {
            return -1;
        }
    }
    while (s->done < count) {
        if (scale_progress(s, start, what, 0) != 0) {
            return -1;
        }
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double*)a, y = *(const double*)b;

    return (x > y) - (x < y);
}

/* put_short and a flush on each endpoint in turn: median and p99 */
static int scale_latency(scale_t *s)
{
    unsigned k, count = s->n * ((s->opts->lat_samples + s->n - 1) / s->n);
    double *lat = calloc(count, sizeof(*lat)), start;

    for (k = 0; k < count; ++k) {
        start = now_sec();
        if ((scale_put_retry(s, k % s->n, "latency put") != 0) ||
            (scale_flush_wait(s, k % s->n, 1, "latency flush") != 0)) {
            free(lat);
            return -1;
        }
        lat[k] = (now_sec() - start) * 1e6;
    }
    qsort(lat, count, sizeof(*lat), cmp_double);
    s->res->lat_med_us = (count % 2) ? lat[count / 2] :
                         (lat[count / 2 - 1] + lat[count / 2]) / 2;
    s->res->lat_p99_us = lat[(unsigned)ceil(count * 0.99) - 1];
    free(lat);
    return 0;
}

/* put_short round-robin (the client progressed every 16, as ucx_perftest
 * does), then a flush of all: operations per second */
static int scale_rate(scale_t *s)
{
    double start = now_sec();
    unsigned long ops = 0;
    unsigned i = 0;

    while (ops < s->opts->rate_ops) {
        if (scale_put_retry(s, i, "message rate put") != 0) {
            return -1;
        }
        i = (i + 1 == s->n) ? 0 : i + 1;
        if ((++ops % 16) == 0) {
            uct_worker_progress(s->worker[0]);
            if (((ops % 1024) == 0) &&
                (now_sec() - start > s->opts->rate_sec)) {
                break;
            }
        }
    }
    if (scale_flush_wait(s, 0, s->n, "message rate flush") != 0) {
        return -1;
    }
    s->res->rate_ops = ops / (now_sec() - start);
    return 0;
}

/* Both workers progress, nothing posted, for -i seconds */
static int scale_idle(scale_t *s)
{
    double start = now_sec();

    while (now_sec() - start < s->opts->idle_sec) {
        if (scale_progress(s, start, "idle", 0) != 0) {
            return -1;
        }
        usleep(1000);
    }
    return 0;
}

/* One N, in the child: its numbers into RES, written to FD; 0 when all
 * were measured. Nothing is torn down: the child exits, and the kernel
 * releases its QPs. */
static int scale_child(const scale_opts_t *opts, unsigned n,
                       scale_result_t *res, int fd)
{
    scale_t s = { .opts = opts, .res = res, .n = n };
    double rss0, heap0, rss1, heap1;
    unsigned i;
    int rc;

    s.eps      = calloc(n, sizeof(*s.eps));
    s.peer_eps = calloc(n, sizeof(*s.peer_eps));
    s.comps    = calloc(n, sizeof(*s.comps));
    /* the first page takes the puts of connect, latency and rate; the
     * stream's slots follow it (scale_flap.c) */
    s.target_len = 4096 + ((opts->flap_sec > 0) ?
                           (n * 16 + 4095) / 4096 * 4096 : 0);
    for (i = 0; i < n; ++i) {
        s.comps[i].super.func = scale_comp_cb;
        s.comps[i].s          = &s;
    }
    if (opts->flap_sec > 0) {
        scale_flap_watch();
    }
    rc = scale_setup(&s);
    if (rc == 0) {
        scale_mem(&rss0, &heap0);
        rc = scale_connect(&s);
        if (rc == 0) {
            scale_mem(&rss1, &heap1);
            res->rss_kb  = (rss1 - rss0) / n;
            res->heap_kb = (heap1 - heap0) / n;
            rc           = (opts->flap_sec > 0) ? scale_flap(&s) :
                           scale_latency(&s);
        }
        rc = rc ? rc : (opts->flap_sec > 0) ? 0 : scale_rate(&s);
        if (rc == 0) {
            scale_mem(&rss1, &heap1);
            res->rss_traffic_kb = (rss1 - rss0) / n;
            rc                  = scale_idle(&s);
        }
        if (rc == 0) {
            scale_mem(&rss1, &heap1);
            res->rss_idle_kb  = (rss1 - rss0) / n;
            res->heap_idle_kb = (heap1 - heap0) / n;
        }
    }
    if (write(fd, res, sizeof(*res)) != sizeof(*res)) {
        rc = -1;
    }
    return rc;
}

/* Runs one N in a child; its row's numbers and note; 0 if all measured */
static int scale_run(const scale_opts_t *opts, unsigned n,
                     scale_result_t *res)
{
    /* a backstop for a hang outside the bounded waits */
    double limit = 4 * opts->wait_sec + opts->rate_sec + opts->flap_sec +
                   opts->idle_sec + 30;
    struct pollfd pfd = { .events = POLLIN };
    int fds[2], st = 0, polled;
    ssize_t got = 0;
    size_t len;
    pid_t pid;

    fflush(stdout);
    if ((pipe(fds) != 0) || ((pid = fork()) < 0)) {
        snprintf(res->note, sizeof(res->note), "pipe or fork: %m");
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        _exit((scale_child(opts, n, res, fds[1]) == 0) ? 0 : 1);
    }
    close(fds[1]);
    pfd.fd = fds[0];
    polled = poll(&pfd, 1, limit * 1000);
    if (polled == 1) {
        got = read(fds[0], res, sizeof(*res));
    } else {
        kill(pid, SIGKILL);
    }
    close(fds[0]);
    waitpid(pid, &st, 0);
    if (WIFEXITED(st) && (WEXITSTATUS(st) == 0) && (got == sizeof(*res))) {
        return 0;
    }
    if (got != sizeof(*res)) {
        *res = (scale_result_t)SCALE_RESULT_NONE;
    }
    len = strlen(res->note);
    if (polled != 1) {
        snprintf(res->note, sizeof(res->note), "no result within %.0f s:"
                 " killed", limit);
    } else if (WIFSIGNALED(st)) {
        snprintf(res->note + len, sizeof(res->note) - len, "%sdied of"
                 " signal %d (%s)", len ? "; " : "", WTERMSIG(st),
                 strsignal(WTERMSIG(st)));
    } else if (len == 0) {
        snprintf(res->note, sizeof(res->note), "exited %d", WEXITSTATUS(st));
    }
    return -1;
}

/* What the verbs devices allow, a '# ' line each */
static void scale_limits(const scale_opts_t *opts)
{
    struct ibv_device **list = ibv_get_device_list(NULL);
    struct ibv_device_attr attr;
    struct ibv_context *ctx;
    const char *name;
    int i, k;

    for (k = 0; (list != NULL) && (k < 2); ++k) {
        for (i = 0; (list[i] != NULL) &&
                    ((k == 0) || strcmp(opts->dev[0], opts->dev[1])); ++i) {
            name = ibv_get_device_name(list[i]);
            if ((strlen(name) != strcspn(opts->dev[k], ":")) ||
                strncmp(name, opts->dev[k], strlen(name)) ||
                ((ctx = ibv_open_device(list[i])) == NULL)) {
                continue;
            }
            if (ibv_query_device(ctx, &attr) == 0) {
                printf("# %s: max_qp %d, max_cq %d, max_mr %d, max_srq %d,"
                       " max_qp_wr %d\n", name, attr.max_qp, attr.max_cq,
                       attr.max_mr, attr.max_srq, attr.max_qp_wr);
            }
            ibv_close_device(ctx);
        }
    }
    if (list != NULL) {
        ibv_free_device_list(list);
    }
}

/* -n 1,16,64: 0, or -1 if it is not a list of positive numbers */
static int scale_parse_n(scale_opts_t *opts, const char *arg)
{
    char *end;

    for (opts->n_count = 0; opts->n_count < SCALE_MAX_N;) {
        opts->n[opts->n_count] = strtoul(arg, &end, 10);
        if ((end == arg) || (opts->n[opts->n_count++] == 0) ||
            ((*end != ',') && (*end != '\0'))) {
            return -1;
        } else if (*end == '\0') {
            return 0;
        }
        arg = end + 1;
    }
    return -1;
}

int main(int argc, char **argv)
{
    scale_opts_t opts = { .rep = 1, .lat_samples = 2000,
                          .rate_ops = 100000, .rate_sec = 2, .wait_sec = 60,
                          .idle_sec = 3 };
    int c, bad = 0, failed = 0;
    unsigned i, largest = 0;
    scale_result_t res;
    size_t len;
    char *p;

    while ((c = getopt(argc, argv, "t:T:d:D:n:R:l:r:s:i:w:F:f:H")) != -1) {
        switch (c) {
        case 't': opts.tl          = optarg; break;
        case 'T': opts.name        = optarg; break;
        case 'd': opts.dev[0]      = optarg; break;
        case 'D': opts.dev[1]      = optarg; break;
        case 'n': bad |= scale_parse_n(&opts, optarg); break;
        case 'R': opts.rep         = atoi(optarg); break;
        case 'l': opts.lat_samples = atoi(optarg); break;
        case 'r': opts.rate_ops    = atol(optarg); break;
        case 's': opts.rate_sec    = atof(optarg); break;
        case 'i': opts.idle_sec    = atof(optarg); break;
        case 'w': opts.wait_sec    = atof(optarg); break;
        case 'F': opts.flap_sec    = atof(optarg); break;
        case 'f': opts.flag        = optarg; break;
        case 'H': printf("%s\n", SCALE_HEADER); return 0;
        default:  bad = 1;
        }
    }
    if (bad || (opts.tl == NULL) || (opts.dev[0] == NULL) ||
        (opts.n_count == 0) || (optind != argc) || (opts.lat_samples == 0) ||
        (opts.rate_ops == 0) || !(opts.wait_sec > 0) ||
        !(opts.idle_sec >= 0)) {
        fprintf(stderr, "usage: syncmem-run scale -t TL -d DEV:PORT"
                " [-D DEV:PORT] -n N[,N...] [-T NAME] [-R REP] [-l SAMPLES]"
                " [-r OPS] [-s SEC] [-i SEC] [-w SEC] [-F SEC [-f FILE]] |"
                " scale -H\n");
        return 2;
    }
    opts.name   = opts.name ? opts.name : opts.tl;
    opts.dev[1] = opts.dev[1] ? opts.dev[1] : opts.dev[0];

    for (i = 0; i < opts.n_count; ++i) {
        res = (scale_result_t)SCALE_RESULT_NONE;
        if (scale_run(&opts, opts.n[i], &res) == 0) {
            largest = (opts.n[i] > largest) ? opts.n[i] : largest;
        } else {
            failed = 1;
            len    = strlen(res.note);
            if (opts.n_count > 1) { /* (alone, there was no "before it") */
                snprintf(res.note + len, sizeof(res.note) - len, "%slargest N"
                         " measured before it: %u", len ? "; " : "", largest);
            }
        }
        for (p = res.note; *p != '\0'; ++p) {
            *p = ((*p == ',') || (*p == '\n')) ? ';' : *p;
        }
        printf("%s,%u,%u,%.1f,%.1f,%.1f,%.1f,%.2f,%.2f,%.0f,%.1f,%.1f,%s\n",
               opts.name, opts.n[i], opts.rep, res.rss_kb, res.rss_traffic_kb,
               res.heap_kb, res.connect_ms, res.lat_med_us, res.lat_p99_us,
               res.rate_ops, res.rss_idle_kb, res.heap_idle_kb, res.note);
    }
    if (failed && (opts.n_count > 1)) {
        printf("# %s: largest N measured: %u\n", opts.name, largest);
    }
    scale_limits(&opts); /* (last: no verbs state in a child's parent) */
    return failed;
}
