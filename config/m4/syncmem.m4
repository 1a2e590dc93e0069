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
AC_DEFUN([SYNCMEM_CHECK_UCX], [
    AC_ARG_WITH([ucx],
        [AS_HELP_STRING([--with-ucx=PREFIX], [installed UCX (default: from pkg-config)])],
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

    AS_IF([test -n "$with_ucx"],
          [export PKG_CONFIG_PATH="$with_ucx/lib/pkgconfig:$with_ucx/lib64/pkgconfig:$with_ucx/lib/x86_64-linux-gnu/pkgconfig:$PKG_CONFIG_PATH"])
    PKG_CHECK_MODULES([UCX], [ucx-uct ucx-ucs], [],
        [AC_MSG_ERROR([UCX development files not found: install libucx-dev (Debian) or pass --with-ucx=PREFIX])])
    UCX_VERSION=$($PKG_CONFIG --modversion ucx-uct)
    ucx_libdir=$($PKG_CONFIG --variable=libdir ucx-uct)
    ucx_bindir=$($PKG_CONFIG --variable=bindir ucx-uct)
    AS_IF([test -z "$ucx_bindir"],
          [ucx_bindir="$($PKG_CONFIG --variable=prefix ucx-uct)/bin"])

    AC_PATH_PROG([UCX_INFO], [ucx_info], [], [$ucx_bindir:$PATH])
    AS_IF([test -z "$UCX_INFO"],
        [AC_MSG_ERROR([ucx_info not found: install ucx-utils (Debian); it reports the build configuration the plugin must match])])
    ucx_info_version=$($UCX_INFO -v | sed -n 's/^# Version //p')
    AS_IF([test "$ucx_info_version" != "$UCX_VERSION"],
        [AC_MSG_ERROR([ucx_info reports UCX $ucx_info_version but the development files are $UCX_VERSION; install matching ucx-utils and libucx-dev])])

    # Internal headers: exactly this release's source tree.
    AS_IF([test -n "$with_ucx_src"],
          [UCX_SRC=$(cd "$with_ucx_src" 2>/dev/null && pwd) ||
               AC_MSG_ERROR([--with-ucx-src=$with_ucx_src: no such directory])],
          [UCX_SRC="$ac_pwd/.ucx-src/ucx-$UCX_VERSION"
           AS_IF([test ! -d "$UCX_SRC"],
               [AC_MSG_NOTICE([fetching the UCX $UCX_VERSION source tree into $UCX_SRC])
                AS_MKDIR_P(["$ac_pwd/.ucx-src"])
                "$srcdir/config/fetch-ucx-src.sh" "$UCX_VERSION" "$UCX_SRC" ||
                    AC_MSG_ERROR([could not fetch the UCX $UCX_VERSION source; pass --with-ucx-src=DIR])])])
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
    UCX_VERSION_MAJOR=${UCX_VERSION%%.*}
    UCX_VERSION_MINOR=$(echo "$UCX_VERSION" | cut -d. -f2)

    # Loading: UCX >= 1.22 loads third-party modules from UCX_PLUGIN_PATH;
    # older releases load only their own compiled-in module names, so the
    # module must be preloaded (contrib/syncmem-run).
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
