/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ucp_tag_bw: UCP tag bandwidth between two processes (this one and a
 * fork), with the endpoints' error handling mode chosen: ucx_perftest 1.13
 * cannot set it, and peer error handling is what decides whether UCP gets a
 * zero-copy rendezvous lane (UCT_MD_FLAG_INVALIDATE).
 *
 *   syncmem-run ucp_tag_bw SIZE ITERS none|peer
 *
 * UCX_TLS and UCX_NET_DEVICES choose the transport, as for any UCP program.
 * The receiver checks every message's bytes. Prints one line:
 *   "ucp_tag_bw size=SIZE mode=MODE iters=ITERS MBps=X"
 * (MB = 10^6 bytes, timed at the sender from the first send after a warm-up
 * to the last completion). Exits 1 on any error or wrong byte.
 */
#include <ucp/api/ucp.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WINDOW 4   /* messages in flight */
#define WARMUP 4
#define TAG    0x77

static int failed;

static void ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    fprintf(stderr, "ucp_tag_bw: endpoint error: %s\n",
            ucs_status_string(status));
    failed = 1;
}

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static ucs_status_t wait_req(ucp_worker_h worker, void *req)
{
    ucs_status_t status;
    double deadline = now() + 60;

    if (!UCS_PTR_IS_PTR(req)) {
        return UCS_PTR_STATUS(req);
    }
    while ((status = ucp_request_check_status(req)) == UCS_INPROGRESS) {
        ucp_worker_progress(worker);
        if (now() > deadline) {
            fprintf(stderr, "ucp_tag_bw: a request took over 60 s\n");
            return UCS_ERR_TIMED_OUT;
        }
    }
    ucp_request_free(req);
    return status;
}

static void fill(unsigned char *buf, size_t size, unsigned i)
{
    size_t j;

    for (j = 0; j < size; j += 8) {
        memcpy(buf + j, &(uint64_t){ (uint64_t)i << 40 | j },
               (size - j < 8) ? size - j : 8);
    }
}

static void xwrite(int fd, const void *buf, size_t len)
{
    if (write(fd, buf, len) != (ssize_t)len) {
        perror("ucp_tag_bw: write");
        exit(1);
    }
}

static void xread(int fd, void *buf, size_t len)
{
    size_t got = 0;
    ssize_t n;

    while (got < len) {
        n = read(fd, (char*)buf + got, len - got);
        if (n <= 0) {
            fprintf(stderr, "ucp_tag_bw: the other process is gone\n");
            exit(1);
        }
        got += n;
    }
}

int main(int argc, char **argv)
{
    ucp_params_t params = { .field_mask = UCP_PARAM_FIELD_FEATURES,
                            .features   = UCP_FEATURE_TAG };
    ucp_worker_params_t wparams = { .field_mask =
                                            UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                                    .thread_mode = UCS_THREAD_MODE_SINGLE };
    int to_child[2], to_parent[2], sender, status_code = 0;
    size_t size, addr_len, peer_len;
    ucp_address_t *addr;
    ucp_err_handling_mode_t mode;
    unsigned iters, i, j;
    ucp_ep_params_t ep_params;
    ucp_request_param_t rp = { 0 };
    ucp_context_h context;
    ucp_worker_h worker;
    void *reqs[WINDOW], *peer;
    unsigned char *bufs[WINDOW];
    ucp_ep_h ep;
    double start = 0;
    pid_t child;

    if ((argc != 4) || (strcmp(argv[3], "none") && strcmp(argv[3], "peer"))) {
        fprintf(stderr, "usage: ucp_tag_bw SIZE ITERS none|peer\n");
        return 2;
    }
    size  = strtoul(argv[1], NULL, 0);
    iters = strtoul(argv[2], NULL, 0);
    mode  = strcmp(argv[3], "peer") ? UCP_ERR_HANDLING_MODE_NONE :
                                      UCP_ERR_HANDLING_MODE_PEER;
    if ((size == 0) || (iters == 0) || pipe(to_child) || pipe(to_parent)) {
        fprintf(stderr, "ucp_tag_bw: bad size or iterations, or no pipe\n");
        return 2;
    }

    child  = fork();
    sender = (child != 0);
    if ((ucp_init(&params, NULL, &context) != UCS_OK) ||
        (ucp_worker_create(context, &wparams, &worker) != UCS_OK) ||
        (ucp_worker_get_address(worker, &addr, &addr_len) != UCS_OK)) {
        fprintf(stderr, "ucp_tag_bw: cannot start UCP\n");
        return 1;
    }

    /* addresses both ways, then each side has an endpoint to the other */
    xwrite(sender ? to_child[1] : to_parent[1], &addr_len, sizeof(addr_len));
    xwrite(sender ? to_child[1] : to_parent[1], addr, addr_len);
    xread(sender ? to_parent[0] : to_child[0], &peer_len, sizeof(peer_len));
    peer = malloc(peer_len);
    xread(sender ? to_parent[0] : to_child[0], peer, peer_len);

    memset(&ep_params, 0, sizeof(ep_params));
    ep_params.field_mask     = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                               UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                               UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep_params.address        = peer;
    ep_params.err_mode       = mode;
    ep_params.err_handler.cb = ep_error;
    if (ucp_ep_create(worker, &ep_params, &ep) != UCS_OK) {
        fprintf(stderr, "ucp_tag_bw: cannot create an endpoint\n");
        return 1;
    }

    for (j = 0; j < WINDOW; ++j) {
        bufs[j] = malloc(size);
        memset(bufs[j], 0, size);
    }

    for (i = 0; (i < iters + WARMUP) && !failed; i += WINDOW) {
        if (sender && (i == WARMUP)) {
            start = now();
        }
        for (j = 0; (j < WINDOW) && (i + j < iters + WARMUP); ++j) {
            if (sender) {
                fill(bufs[j], size, i + j);
                reqs[j] = ucp_tag_send_nbx(ep, bufs[j], size, TAG, &rp);
            } else {
                reqs[j] = ucp_tag_recv_nbx(worker, bufs[j], size, TAG,
                                           (ucp_tag_t)-1, &rp);
            }
        }
        for (j = 0; (j < WINDOW) && (i + j < iters + WARMUP); ++j) {
            if (wait_req(worker, reqs[j]) != UCS_OK) {
                failed = 1;
                continue;
            }
            if (!sender) {
                unsigned char *want = malloc(size);
                fill(want, size, i + j);
                if (memcmp(want, bufs[j], size)) {
                    fprintf(stderr, "ucp_tag_bw: message %u arrived wrong\n",
                            i + j);
                    failed = 1;
                }
                free(want);
            }
        }
    }

    if (sender && !failed) {
        printf("ucp_tag_bw size=%zu mode=%s iters=%u MBps=%.1f\n", size,
               argv[3], iters, (double)size * iters / (now() - start) / 1e6);
    }
    /* both done before either closes: the receiver's last reads */
    xwrite(sender ? to_child[1] : to_parent[1], &failed, sizeof(failed));
    xread(sender ? to_parent[0] : to_child[0], &status_code,
          sizeof(status_code));
    failed |= status_code;

    ucp_request_param_t cp = { .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                               .flags        = UCP_EP_CLOSE_FLAG_FORCE };
    wait_req(worker, ucp_ep_close_nbx(ep, &cp));
    ucp_worker_release_address(worker, addr);
    ucp_worker_destroy(worker);
    ucp_cleanup(context);
    if (sender) {
        int wstatus;
        if ((waitpid(child, &wstatus, 0) != child) ||
            !WIFEXITED(wstatus) || WEXITSTATUS(wstatus)) {
            failed = 1;
        }
    }
    return failed ? 1 : 0;
}
