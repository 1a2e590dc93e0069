dnl SPDX-License-Identifier: BSD-3-Clause
#
# Checks for the libraries syncmem builds against.
#

# libibverbs: the data path talks to the HCA through it and nothing else.
AC_DEFUN([SYNCMEM_CHECK_VERBS], [
    AC_CHECK_HEADER([infiniband/verbs.h], [],
        [AC_MSG_ERROR([infiniband/verbs.h not found: install libibverbs-dev (rdma-core)])])
    AC_CHECK_LIB([ibverbs], [ibv_get_device_list], [VERBS_LIBS=-libverbs],
        [AC_MSG_ERROR([libibverbs not found: install libibverbs-dev (rdma-core)])])
    AC_CHECK_DECLS([ibv_reg_dmabuf_mr, ibv_query_gid_ex], [], [],
                   [[#include <infiniband/verbs.h>]])
    AC_SUBST([VERBS_LIBS])
])

# The installed UCX, its build's config.h and its matching source tree.
#
# Three ways to have UCX (SYNCMEM_UCX_WAYS, repeated in every error about
# finding it):
#  a. Debian's UCX (libucx-dev, ucx-utils): pkg-config finds it, and
#     Debian's source package of exactly that version is fetched;
#  b. --with-ucx-src=DIR: the installed UCX with a tree of its version;
#  c. --with-ucx=PREFIX --with-ucx-src=DIR: a UCX installed in a prefix of
#     its own. Headers, libraries, ucx_info and pkg-config files all come
#     from PREFIX, never from the system's UCX; the programs get an rpath to
#     its libdir.
m4_define([SYNCMEM_UCX_WAYS],
[[syncmem needs UCX's development files, its ucx_info and a source tree of exactly its version, in one of three ways:
  a. Debian/Ubuntu UCX: apt-get install libucx-dev ucx-utils dpkg-dev; configure then fetches Debian's source package of exactly that version (apt-get source);
  b. --with-ucx-src=DIR: a UCX source tree of exactly the installed UCX version;
  c. --with-ucx=PREFIX --with-ucx-src=DIR: a UCX installed in its own prefix (PREFIX/bin/ucx_info, PREFIX/lib/pkgconfig/ucx-uct.pc) and the tree it was built from (contrib/pkg/ucx-prefix.sh builds one from Debian's source package).]])

AC_DEFUN([SYNCMEM_CHECK_UCX], [
    AC_ARG_WITH([ucx],
        [AS_HELP_STRING([--with-ucx=PREFIX],
            [UCX installed in its own prefix: its headers, libraries,
             ucx_info and pkg-config files are used, and programs get an
             rpath to its libdir; needs --with-ucx-src
             (default: the system's UCX, from pkg-config)])],
        [], [with_ucx=])
    AC_ARG_WITH([ucx-src],
        [AS_HELP_STRING([--with-ucx-src=DIR],
            [UCX source tree of exactly the installed version, for its internal
             headers (default: fetch Debian's source package into .ucx-src/)])],
        [], [with_ucx_src=])
    AC_ARG_WITH([ucx-module-dir],
        [AS_HELP_STRING([--with-ucx-module-dir=DIR],
            [where 'make install' puts the module (default: UCX's module directory)])],
        [], [with_ucx_module_dir=])

    UCX_PREFIX=
    AS_CASE(["$with_ucx"],
      [""|yes], [],
      [no], [AC_MSG_ERROR([syncmem is a UCX transport: --without-ucx is not possible])],
      [AS_IF([test -z "$with_ucx_src"],
           [AC_MSG_ERROR([--with-ucx=$with_ucx needs --with-ucx-src=DIR, the source tree of exactly the UCX installed there (UCX installs no internal headers).
SYNCMEM_UCX_WAYS])])
       UCX_PREFIX=$(cd "$with_ucx" 2>/dev/null && pwd) ||
           AC_MSG_ERROR([--with-ucx=$with_ucx: no such directory.
SYNCMEM_UCX_WAYS])
       # Its pkg-config files, and no fallback to the system's.
       ucx_pcdir=
       for d in "$UCX_PREFIX/lib/pkgconfig" "$UCX_PREFIX/lib64/pkgconfig" \
                "$UCX_PREFIX"/lib/*-linux-gnu*/pkgconfig; do
           AS_IF([test -f "$d/ucx-uct.pc" -a -f "$d/ucx-ucs.pc"],
                 [ucx_pcdir=$d; break])
       done
       AS_IF([test -z "$ucx_pcdir"],
           [AC_MSG_ERROR([--with-ucx=$UCX_PREFIX has no pkg-config files (ucx-uct.pc, ucx-ucs.pc in lib/pkgconfig, lib64/pkgconfig or lib/<triplet>/pkgconfig); is it a UCX installation?
SYNCMEM_UCX_WAYS])])
       PKG_CONFIG_PATH="$ucx_pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
       export PKG_CONFIG_PATH
       AS_IF([test ! -x "$UCX_PREFIX/bin/ucx_info"],
           [AC_MSG_ERROR([--with-ucx=$UCX_PREFIX has no bin/ucx_info, which reports the build configuration the module must match (the system's would not do).
SYNCMEM_UCX_WAYS])])
       UCX_INFO=$UCX_PREFIX/bin/ucx_info])

    PKG_CHECK_MODULES([UCX], [ucx-uct ucx-ucs], [],
        [AC_MSG_ERROR([UCX development files not found by pkg-config (ucx-uct, ucx-ucs).
SYNCMEM_UCX_WAYS])])
    UCX_VERSION=$($PKG_CONFIG --modversion ucx-uct)
    ucx_libdir=$($PKG_CONFIG --variable=libdir ucx-uct)
    ucx_bindir=$($PKG_CONFIG --variable=bindir ucx-uct)
    AS_IF([test -z "$ucx_bindir"],
          [ucx_bindir="$($PKG_CONFIG --variable=prefix ucx-uct)/bin"])
    AS_IF([test ! -f "$ucx_libdir/libuct.so" -o ! -f "$ucx_libdir/libucs.so"],
        [AC_MSG_ERROR([pkg-config's UCX libdir $ucx_libdir has no libuct.so and libucs.so.
SYNCMEM_UCX_WAYS])])
    UCX_LIBDIR=$(cd "$ucx_libdir" && pwd -P)

    AS_IF([test -n "$UCX_PREFIX"], [
        # Everything from the prefix: a .pc file that pulls the system's
        # UCX in (Requires, a moved prefix) would mix the two silently.
        AC_MSG_CHECKING([that UCX comes from $UCX_PREFIX alone])
        ucx_realprefix=$(cd "$UCX_PREFIX" && pwd -P)
        for m in ucx-uct ucx-ucs; do
            d=$($PKG_CONFIG --variable=pcfiledir $m)
            AS_IF([test "$d" != "$ucx_pcdir"],
                [AC_MSG_RESULT([no])
                 AC_MSG_ERROR([pkg-config takes $m from $d, not from $ucx_pcdir])])
            d=$($PKG_CONFIG --variable=libdir $m)
            AS_CASE(["$(cd "$d" 2>/dev/null && pwd -P)/"], ["$ucx_realprefix"/*], [],
                [AC_MSG_RESULT([no])
                 AC_MSG_ERROR([$ucx_pcdir/$m.pc names libdir $d, outside $UCX_PREFIX (was the prefix moved?); rebuild or reinstall UCX there])])
        done
        AS_CASE([" $UCX_CFLAGS $UCX_LIBS "],
            [*" -I/usr/include "*|*" -L/usr/lib"*|*" -L/lib"*],
            [AC_MSG_RESULT([no])
             AC_MSG_ERROR([pkg-config's flags for UCX in $UCX_PREFIX name system directories: $UCX_CFLAGS $UCX_LIBS])])
        AS_IF([test "$($PKG_CONFIG --variable=includedir ucx-uct)" = /usr/include],
            [AC_MSG_RESULT([no])
             AC_MSG_ERROR([$ucx_pcdir/ucx-uct.pc names includedir /usr/include])])
        # ucx_info must run on the prefix's libraries too (its rpath).
        AS_IF([command -v ldd >/dev/null 2>&1], [
            for l in libucs.so.0 libuct.so.0; do
                d=$(ldd "$UCX_INFO" 2>/dev/null | sed -n "s|^.*$l => \(.*\)/$l .*|\1|p")
                AS_IF([test "$(cd "$d" 2>/dev/null && pwd -P)" != "$UCX_LIBDIR"],
                    [AC_MSG_RESULT([no])
                     AC_MSG_ERROR([$UCX_INFO loads $l from '$d', not from $UCX_LIBDIR (no rpath? LD_LIBRARY_PATH?)])])
            done])
        AC_MSG_RESULT([yes])
        # Our programs and the module load the prefix's libraries.
        UCX_LIBS="-Wl,-rpath,$ucx_libdir $UCX_LIBS"
    ], [
        AC_PATH_PROG([UCX_INFO], [ucx_info], [], [$ucx_bindir:$PATH])
        AS_IF([test -z "$UCX_INFO"],
            [AC_MSG_ERROR([ucx_info not found (ucx-utils on Debian); it reports the build configuration the module must match.
SYNCMEM_UCX_WAYS])])
    ])
    # (UCX 1.13 prints "# Version X", later releases "# Library version: X")
    ucx_info_version=$($UCX_INFO -v | sed -n 's/^# \(Library version:\|Version\) *\(@<:@0-9.@:>@*\).*/\2/p')
    AS_IF([test "$ucx_info_version" != "$UCX_VERSION"],
        [AC_MSG_ERROR([$UCX_INFO reports UCX $ucx_info_version but the development files ($ucx_libdir) are $UCX_VERSION; install matching ucx-utils and libucx-dev])])

    # Internal headers: exactly this release's source tree.
    AS_IF([test -n "$with_ucx_src"],
          [UCX_SRC=$(cd "$with_ucx_src" 2>/dev/null && pwd) ||
               AC_MSG_ERROR([--with-ucx-src=$with_ucx_src: no such directory])],
          [UCX_SRC="$ac_pwd/.ucx-src/ucx-$UCX_VERSION"
           AS_IF([test ! -d "$UCX_SRC"],
               [AC_MSG_NOTICE([fetching the UCX $UCX_VERSION source tree into $UCX_SRC])
                AS_MKDIR_P(["$ac_pwd/.ucx-src"])
                "$srcdir/config/fetch-ucx-src.sh" "$UCX_VERSION" "$UCX_SRC" ||
                    AC_MSG_ERROR([could not fetch Debian's source package of UCX $UCX_VERSION (see above).
SYNCMEM_UCX_WAYS])])])
    AS_IF([test ! -f "$UCX_SRC/src/uct/base/uct_iface.h" -o ! -f "$UCX_SRC/configure.ac"],
        [AC_MSG_ERROR([$UCX_SRC is not a UCX source tree (no src/uct/base/uct_iface.h)])])
    ucx_src_version=$(sed -n 's/^.efine(\@<:@ucx_ver_\(major\|minor\|patch\)\@:>@, *\(@<:@0-9@:>@*\)).*/\2/p' \
                      "$UCX_SRC/configure.ac" | paste -sd.)
    AC_MSG_CHECKING([UCX source tree version])
    AC_MSG_RESULT([$ucx_src_version])
    AS_IF([test "$ucx_src_version" != "$UCX_VERSION"],
        [AC_MSG_ERROR([the UCX source tree $UCX_SRC is version $ucx_src_version but the installed UCX is $UCX_VERSION; struct layouts would not match. Pass --with-ucx-src= a tree of UCX $UCX_VERSION (or remove it to let configure fetch one)])])

    # The installed build's config.h, so internal structs have its layout.
    AS_MKDIR_P([ucx-config])
    "$srcdir/config/gen-ucx-config.sh" "$UCX_INFO" > ucx-config/config.h ||
        AC_MSG_ERROR([could not generate ucx-config/config.h from '$UCX_INFO -b'])

    UCX_CPPFLAGS="-DHAVE_CONFIG_H -I\$(abs_top_builddir)/ucx-config -I$UCX_SRC/src $UCX_CFLAGS"
    UCX_LIBS="$UCX_LIBS"
    UCX_MODULE_DIR=${with_ucx_module_dir:-$ucx_libdir/ucx}
    UCX_BINDIR=$(dirname "$UCX_INFO")
    UCX_VERSION_MAJOR=${UCX_VERSION%%.*}
    UCX_VERSION_MINOR=$(echo "$UCX_VERSION" | cut -d. -f2)

    # Loading: UCX >= 1.22 loads third-party modules from UCX_PLUGIN_PATH;
    # older releases load only their own compiled-in module names, so the
    # module must be preloaded (contrib/tools/syncmem-run).
    AS_IF([test "$UCX_VERSION_MAJOR" -gt 1 -o "$UCX_VERSION_MINOR" -ge 22],
          [SYNCMEM_LOAD_METHOD=plugin-path], [SYNCMEM_LOAD_METHOD=preload])

    save_CPPFLAGS=$CPPFLAGS
    CPPFLAGS="-DHAVE_CONFIG_H -I$ac_pwd/ucx-config -I$UCX_SRC/src $UCX_CFLAGS $CPPFLAGS"
    AC_MSG_CHECKING([whether UCX internal headers compile])
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <uct/base/uct_iface.h>
                                         #include <uct/base/uct_md.h>]],
                                       [[return sizeof(uct_base_iface_t) == 0;]])],
        [AC_MSG_RESULT([yes])],
        [AC_MSG_RESULT([no])
         AC_MSG_ERROR([UCX internal headers from $UCX_SRC do not compile; see config.log])])
    CPPFLAGS=$save_CPPFLAGS

    AC_SUBST([UCX_VERSION])
    AC_SUBST([UCX_INFO])
    AC_SUBST([UCX_SRC])
    AC_SUBST([UCX_CPPFLAGS])
    AC_SUBST([UCX_LIBS])
    AC_SUBST([UCX_MODULE_DIR])
    AC_SUBST([UCX_PREFIX])
    AC_SUBST([UCX_LIBDIR])
    AC_SUBST([UCX_BINDIR])
    AC_SUBST([SYNCMEM_LOAD_METHOD])
])

# googletest, compiled by this project from Debian's googletest sources.
AC_DEFUN([SYNCMEM_CHECK_GTEST], [
    AC_ARG_WITH([gtest-src],
        [AS_HELP_STRING([--with-gtest-src=DIR],
            [googletest source (default: /usr/src/googletest/googletest)])],
        [GTEST_SRC=$withval], [GTEST_SRC=/usr/src/googletest/googletest])
    AS_IF([test ! -f "$GTEST_SRC/src/gtest-all.cc"],
        [AC_MSG_ERROR([googletest sources not found in $GTEST_SRC: install googletest (Debian) or pass --with-gtest-src=DIR])])
    AC_SUBST([GTEST_SRC])
])

# Open MPI, for the MPI test over syncmem (optional to build the module; the
# test reports its absence as a failure, and contrib/bootstrap.sh installs it).
AC_DEFUN([SYNCMEM_CHECK_MPI], [
    AC_PATH_PROG([MPICC], [mpicc])
    AM_CONDITIONAL([HAVE_MPI], [test -n "$MPICC"])
    AC_PATH_PROG([OSHCC], [oshcc])
    AM_CONDITIONAL([HAVE_OSHMEM], [test -n "$OSHCC"])
    AC_PATH_PROG([MPICC_MPICH], [mpicc.mpich])
    AM_CONDITIONAL([HAVE_MPICH], [test -n "$MPICC_MPICH"])
])

# The CUDA driver API header, only to check syncmem_cuda.h's copies of its
# values (the module itself loads libcuda.so.1 at run time, if present).
AC_DEFUN([SYNCMEM_CHECK_CUDA_H], [
    AC_ARG_WITH([cuda],
        [AS_HELP_STRING([--with-cuda=DIR],
                        [CUDA toolkit, for cuda.h (default /usr/local/cuda)])],
        [], [with_cuda=/usr/local/cuda])
    CUDA_CPPFLAGS=
    AS_IF([test "x$with_cuda" != xno && test -f "$with_cuda/include/cuda.h"],
          [CUDA_CPPFLAGS="-I$with_cuda/include"])
    AC_SUBST([CUDA_CPPFLAGS])
    AC_SUBST([with_cuda])
    AM_CONDITIONAL([HAVE_CUDA_H], [test -n "$CUDA_CPPFLAGS"])
])
