# Required: spdlog, fmt, threads. Optional (printed loudly): CUDA, ibverbs, UCX, MPI.
find_package(Threads REQUIRED)
find_package(spdlog REQUIRED)   # Debian: libspdlog-dev (scripts/install-deps.sh)
find_package(fmt REQUIRED)      # Debian: libfmt-dev

# spdlog and fmt are compiled into the library (header-only), so libmycoll.so
# needs no libspdlog.so / libfmt.so of one distribution release (a test checks
# its NEEDED list). Not spdlog::spdlog_header_only: Debian's links fmt::fmt
# (the shared library).
add_library(mycoll_log_deps INTERFACE)
get_target_property(_mycoll_spdlog_inc spdlog::spdlog INTERFACE_INCLUDE_DIRECTORIES)
target_include_directories(mycoll_log_deps SYSTEM INTERFACE ${_mycoll_spdlog_inc})
target_compile_definitions(mycoll_log_deps INTERFACE SPDLOG_HEADER_ONLY SPDLOG_FMT_EXTERNAL)
target_link_libraries(mycoll_log_deps INTERFACE fmt::fmt-header-only)

option(MYCOLL_ENABLE_CUDA "Build the GPU path when a CUDA compiler is found" ON)
include(CheckLanguage)
if(MYCOLL_ENABLE_CUDA)
  check_language(CUDA)
endif()
set(MYCOLL_HAVE_CUDA OFF)
if(MYCOLL_ENABLE_CUDA AND CMAKE_CUDA_COMPILER)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)
  find_package(CUDAToolkit REQUIRED)
  set(MYCOLL_HAVE_CUDA ON)
  message(STATUS "mycoll: CUDA ${CUDAToolkit_VERSION} found: GPU path ON (architectures ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(WARNING "mycoll: no CUDA compiler found (or MYCOLL_ENABLE_CUDA=OFF): GPU path OFF (host collectives only)")
endif()

find_package(MPI COMPONENTS C QUIET)
if(MPI_C_FOUND)
  message(STATUS "mycoll: MPI found: mycoll-perf can compare with MPI (--vs mpi)")
else()
  message(WARNING "mycoll: MPI not found: mycoll-perf built without --vs mpi")
endif()

# UCX (transports/ucx): built whenever the headers are found (libucx-dev);
# libucp/libucs are loaded at run time (transports/ucx/ucxwrap.cc), so the
# same library loads where UCX is absent and MYCOLL_NET=ucx says what to
# install. Without the headers transports/ucx/ucx_stub.cc is built instead.
option(MYCOLL_ENABLE_UCX "Build the UCX transport when its headers are found" ON)
set(MYCOLL_HAVE_UCX OFF)
if(MYCOLL_ENABLE_UCX)
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(MYCOLL_UCX_PC QUIET ucx)
  endif()
  find_path(MYCOLL_UCX_INCLUDE_DIR ucp/api/ucp.h HINTS ${MYCOLL_UCX_PC_INCLUDE_DIRS})
endif()
if(MYCOLL_ENABLE_UCX AND MYCOLL_UCX_INCLUDE_DIR)
  set(MYCOLL_HAVE_UCX ON)
  message(STATUS "mycoll: UCX ${MYCOLL_UCX_PC_VERSION} headers found (${MYCOLL_UCX_INCLUDE_DIR}): "
                 "UCX transport built (libucp loaded at run time)")
else()
  message(WARNING "mycoll: UCX headers not found (ucp/api/ucp.h, e.g. libucx-dev): "
                  "MYCOLL_NET=ucx disabled")
endif()

# nccl.h (lib/nccl, tools --vs nccl) is looked for by those parts; reported
# here only so the summary names it.
find_path(MYCOLL_NCCL_H_DIR nccl.h HINTS /usr/local/cuda/include ${CUDAToolkit_INCLUDE_DIRS})
