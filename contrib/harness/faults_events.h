/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * faults_events.h: syncmem's reconnects as the fault bench's processes see
 * them (contrib/harness/faults.c, faults_mpi.c), one machine-readable line
 * each, printed as it happens (a process that dies later has told them):
 *
 *   event reconnect resumed MS   the same QP pair, resumed, after MS ms
 *   event reconnect newqp MS     onto a new QP, after MS ms
 *   event reconnect gaveup       RECONNECT_TIMEOUT passed: the ep failed
 *   event cm resend N M          a REQ sent again, the Nth time of the
 *                                endpoint's M (UCX_SYNCMEM_CM_RETRIES)
 *   event cm resend reconnect MS a reconnect's REQ sent again, MS ms
 *                                before its RECONNECT_TIMEOUT
 *
 * The transport has no counter to ask for them: they are taken from its own
 * log calls in this process (a UCS log handler), by the format strings of
 * uct_syncmem/syncmem_reconnect.c, which are matched here and nowhere else.
 * Those calls are at diag level: the process runs with UCX_LOG_LEVEL=diag
 * (UCS calls a handler only for a level it logs). UCX's own printing of
 * them is left as it is, for a person reading the output.
 *
 * The handler goes into the libucs already loaded (faults links it; in
 * faults_mpi, Open MPI's pml has loaded it by the end of MPI_Init), found
 * with dlopen(RTLD_NOLOAD): faults_mpi links no UCX of its own, which could
 * be another release than Open MPI's. When that fails the process prints
 * "event watch failed WHY": its reconnects cannot be counted.
 */
#ifndef FAULTS_EVENTS_H
#define FAULTS_EVENTS_H

#include <ucs/debug/log_def.h>

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The format strings' beginnings (syncmem_reconnect.c) */
#define FAULTS_EV_DONE   "syncmem: ep %p: reconnected to iface "
#define FAULTS_EV_GAVEUP "syncmem: ep %p: reconnect to iface "
#define FAULTS_EV_RESEND "syncmem: ep %p resends REQ to iface "

static ucs_log_func_rc_t
faults_events_handler(const char *file, unsigned line, const char *function,
                      ucs_log_level_t level,
                      const ucs_log_component_config_t *comp_conf,
                      const char *format, va_list ap)
{
    char text[1024], *after;
    unsigned again, tries;
    double ms = -1;
    va_list aq;

    if (strncmp(format, FAULTS_EV_DONE, strlen(FAULTS_EV_DONE)) &&
        strncmp(format, FAULTS_EV_GAVEUP, strlen(FAULTS_EV_GAVEUP)) &&
        strncmp(format, FAULTS_EV_RESEND, strlen(FAULTS_EV_RESEND))) {
        return UCS_LOG_FUNC_RC_CONTINUE;
    }
    va_copy(aq, ap);
    vsnprintf(text, sizeof(text), format, aq);
    va_end(aq);
    if (!strncmp(format, FAULTS_EV_RESEND, strlen(FAULTS_EV_RESEND))) {
        after = strstr(text, " (");
        if ((after != NULL) &&
            (sscanf(after, " (%u of UCX_SYNCMEM_CM_RETRIES %u)", &again,
                    &tries) == 2)) {
            printf("event cm resend %u %u\n", again, tries);
        } else if ((after != NULL) &&
                   (sscanf(after, " (reconnect, %lf ms before", &ms) == 1)) {
            printf("event cm resend reconnect %.0f\n", ms);
        } else {
            printf("event cm unparsed %s\n", text);
        }
    } else if (!strncmp(format, FAULTS_EV_DONE, strlen(FAULTS_EV_DONE))) {
        after = strstr(text, " after ");
        if ((after == NULL) || (sscanf(after, " after %lf ms", &ms) != 1)) {
            printf("event reconnect unparsed %s\n", text);
        } else {
            printf("event reconnect %s %.0f\n",
                   strstr(after, "resumed") ? "resumed" : "newqp", ms);
        }
    } else if (strstr(text, " gave up") != NULL) {
        printf("event reconnect gaveup\n");
    }
    fflush(stdout);
    return UCS_LOG_FUNC_RC_CONTINUE;
}

/* Every reconnect from now on is printed */
static void faults_events_watch(void)
{
    void (*push)(ucs_log_func_t);
    void *ucs;

    ucs = dlopen("libucs.so.0", RTLD_NOW | RTLD_NOLOAD);
    if (ucs == NULL) {
        printf("event watch failed libucs.so.0 is not loaded: %s\n", dlerror());
        return;
    }
    push = (void (*)(ucs_log_func_t))dlsym(ucs, "ucs_log_push_handler");
    if (push == NULL) {
        printf("event watch failed no ucs_log_push_handler: %s\n", dlerror());
        return;
    }
    push(faults_events_handler);
}

#endif
