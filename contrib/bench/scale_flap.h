/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * scale_flap.h: scale -F, the verified stream over all N endpoints
 * (scale_flap.c).
 */
#ifndef SCALE_FLAP_H
#define SCALE_FLAP_H

#include "scale_run.h"

/* In the child, before the endpoints: the fault bench's reconnect events */
void scale_flap_watch(void);
/* The stream; 0 when it ran (its verdict is in its output) */
int scale_flap(scale_t *s);

#endif
