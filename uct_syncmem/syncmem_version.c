/*
 * syncmem - which UCX we were loaded into, and registration.
 *
 * The module embeds UCX's internal structs (uct_base_iface_t, uct_md_t,
 * ucs_rcache_t, ...) with the layout of the release it was compiled
 * against. Loaded into another release it would corrupt memory quietly:
 * the first struct that moved would be enough. So before touching any of
 * UCX's lists, the constructor asks the running UCX for its version and
 * registers the transport only if it is exactly the one we were built for;
 * otherwise it says so on one line and leaves UCX to its own transports.
 *
 * libucs and libuct do not report their version; libucp does, and the
 * three always come from one build, so we ask the libucp that sits beside
 * the loaded libucs. Until the check passes, nothing here calls into UCS:
 * even its logger reads global options whose layout differs by release.
 */
#ifndef _GNU_SOURCE
#  define _GNU_SOURCE  /* dladdr */
#endif
#include "syncmem.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <limits.h>

typedef void (*uct_syncmem_get_version_func_t)(unsigned*, unsigned*, unsigned*);

static int uct_syncmem_registered;

/* ucp_get_version of the UCX whose libucs this process runs */
static uct_syncmem_get_version_func_t uct_syncmem_find_get_version(void)
{
    uct_syncmem_get_version_func_t func;
    char path[PATH_MAX];
    const char *base;
    Dl_info info;
    void *dl;

    /* A UCP program (ucx_info, ucx_perftest, MPI) has libucp loaded */
    func = (uct_syncmem_get_version_func_t)dlsym(RTLD_DEFAULT,
                                                 "ucp_get_version");
    if (func != NULL) {
        return func;
    }

    /* A UCT-only program: the libucp installed beside its libucs. Kept
     * loaded (NODELETE): its constructors add UCP's configuration tables to
     * UCS's global list, which must not point into an unloaded library. */
    if (!dladdr((void*)ucs_status_string, &info) || (info.dli_fname == NULL)) {
        return NULL;
    }

    base = strrchr(info.dli_fname, '/');
    base = (base == NULL) ? info.dli_fname : base + 1;
    if ((strncmp(base, "libucs", 6) != 0) ||
        (snprintf(path, sizeof(path), "%.*slibucp%s",
                  (int)(base - info.dli_fname), info.dli_fname,
                  base + 6) >= sizeof(path))) {
        return NULL;
    }

    dl = dlopen(path, RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE);
    if (dl == NULL) {
        return NULL;
    }

    return (uct_syncmem_get_version_func_t)dlsym(dl, "ucp_get_version");
}

int uct_syncmem_ucx_version(unsigned *major, unsigned *minor, unsigned *patch)
{
    uct_syncmem_get_version_func_t get_version;

    get_version = uct_syncmem_find_get_version();
    if (get_version == NULL) {
        return 0;
    }

    get_version(major, minor, patch);
    return 1;
}

static int uct_syncmem_version_check(void)
{
    unsigned major, minor, patch;

    if (!uct_syncmem_ucx_version(&major, &minor, &patch)) {
        fprintf(stderr, "syncmem: libuct_syncmem.so was built for UCX %s but"
                " cannot tell which UCX it is loaded into (no libucp beside"
                " libucs); not registering the syncmem transport (UCX goes"
                " on without it)\n", UCT_VERNO_STRING);
        return 0;
    }

    if ((major == UCT_VERNO_MAJOR) && (minor == UCT_VERNO_MINOR) &&
        (patch == UCT_VERNO_PATCH)) {
        return 1;
    }

    fprintf(stderr, "syncmem: libuct_syncmem.so was built for UCX %s but is"
            " loaded into UCX %u.%u.%u; not registering the syncmem transport"
            " (UCX goes on without it). Rebuild syncmem against UCX %u.%u.%u:"
            " ./configure --with-ucx-src=<its source tree>"
            " [--with-ucx=<its prefix>] (see README, Building)\n",
            UCT_VERNO_STRING, major, minor, patch, major, minor, patch);
    return 0;
}

/* Runs when the library loads (LD_PRELOAD, or UCX's module loader); the
 * library is linked -z nodelete because UCX 1.13 never unlinks a component
 * from its list. */
UCS_STATIC_INIT {
    if (!uct_syncmem_version_check()) {
        return;
    }

    uct_component_register(&uct_syncmem_component);
    uct_tl_register(&uct_syncmem_component, &uct_syncmem_tl);
    uct_syncmem_registered = 1;
}

UCS_STATIC_CLEANUP {
    if (uct_syncmem_registered) {
        uct_tl_unregister(&uct_syncmem_tl);
        uct_component_unregister(&uct_syncmem_component);
    }
}
