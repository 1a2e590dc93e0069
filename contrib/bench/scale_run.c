/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * scale_run.c: the helpers of one N's run that both scale.c and
 * scale_flap.c call.
 */
#include "scale_run.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

double now_sec(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int scale_fail(scale_t *s, const char *fmt, ...)
{
    va_list ap;

    if (s->res->note[0] == '\0') {
        va_start(ap, fmt);
        vsnprintf(s->res->note, sizeof(s->res->note), fmt, ap);
        va_end(ap);
    }
    return -1;
}
