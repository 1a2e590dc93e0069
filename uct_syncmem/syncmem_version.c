/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - the module UCX loads: which UCX are we in, then the transport.
 *
 * The transport (libuct_syncmem_tl.so) embeds UCX's internal structs
 * (uct_base_iface_t, uct_md_t, ucs_rcache_t, ...) with the layout of the
 * release it was compiled against, and refers to internal symbols of that
 * release (config parsers, base ops tables) from its static data, which the
 * dynamic linker resolves at load time. Loaded into another release it would
 * either kill the process with "undefined symbol" before any of our code
 * runs, or corrupt memory quietly. So what UCX loads (libuct_syncmem.so,
 * this file alone) refers to no UCX symbol: it asks the running UCX for its
 * version and loads the transport beside it only if that is exactly the
 * release it was built for; otherwise it says so on one line and leaves UCX
 * to its own transports.
 *
 * libucs and libuct do not report their version; libucp does, and the
 * three always come from one build, so we ask the libucp that sits beside
 * the loaded libucs. Nothing here calls into UCS: even its logger reads
 * global options whose layout differs by release. The only UCX symbols
 * named here are two public functions that every release has; they make
 * libucs and libuct dependencies of this library, so that a preloaded
 * module brings UCX in at startup, before an MPI library dlopen()s its UCX
 * component, and the check finds the UCX of the process.
 */
#ifndef _GNU_SOURCE
#  define _GNU_SOURCE  /* dladdr */
#endif
#include <uct/api/version.h>
#include <uct/api/uct.h>

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <limits.h>

#define UCT_SYNCMEM_TL_LIB "libuct_syncmem_tl.so"

typedef void (*uct_syncmem_get_version_func_t)(unsigned*, unsigned*, unsigned*);

int uct_syncmem_ucx_version(unsigned *major, unsigned *minor, unsigned *patch);

/* Keeps libuct a dependency (see above); never called */
void *uct_syncmem_uct_dependency = (void*)uct_query_components;

/* Path of a file beside the object that defines addr: named to, or (with
 * from) the object's own name with its leading from replaced by to. */
static int uct_syncmem_path_beside(const void *addr, const char *from,
                                   const char *to, char *path, size_t max)
{
    const char *base, *rest = "";
    Dl_info info;

    if (!dladdr(addr, &info) || (info.dli_fname == NULL)) {
        return 0;
    }

    base = strrchr(info.dli_fname, '/');
    base = (base == NULL) ? info.dli_fname : base + 1;
    if (from != NULL) {
        if (strncmp(base, from, strlen(from))) {
            return 0;
        }
        rest = base + strlen(from);
    }

    return snprintf(path, max, "%.*s%s%s", (int)(base - info.dli_fname),
                    info.dli_fname, to, rest) < max;
}

/* ucp_get_version of the UCX whose libucs this process runs */
static uct_syncmem_get_version_func_t uct_syncmem_find_get_version(void)
{
    char path[PATH_MAX];
    void *sym, *dl;

    /* A UCP program (ucx_info, ucx_perftest, MPI) has libucp loaded */
    sym = dlsym(RTLD_DEFAULT, "ucp_get_version");
    if (sym != NULL) {
        return (uct_syncmem_get_version_func_t)sym;
    }

    /* A UCT-only program: the libucp installed beside its libucs, named as
     * libucs is (libucs.so.0 -> libucp.so.0). Kept loaded (NODELETE): its
     * constructors add UCP's configuration tables to UCS's global list,
     * which must not point into an unloaded library. */
    if (!uct_syncmem_path_beside((void*)ucs_status_string, "libucs", "libucp",
                                 path, sizeof(path))) {
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

/* Runs when the library loads (LD_PRELOAD, or UCX's module loader). The
 * transport registers itself from its own constructor; NODELETE because
 * UCX 1.13 never unlinks a component from its list. */
static void __attribute__((constructor)) uct_syncmem_load(void)
{
    char path[PATH_MAX];

    if (!uct_syncmem_version_check()) {
        return;
    }

    if (!uct_syncmem_path_beside((void*)uct_syncmem_load, NULL,
                                 UCT_SYNCMEM_TL_LIB, path, sizeof(path))) {
        fprintf(stderr, "syncmem: cannot find where libuct_syncmem.so was"
                " loaded from; not registering the syncmem transport\n");
        return;
    }

    if (dlopen(path, RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE) == NULL) {
        fprintf(stderr, "syncmem: cannot load the transport %s: %s; not"
                " registering it (is it installed beside"
                " libuct_syncmem.so?)\n", path, dlerror());
    }
}
