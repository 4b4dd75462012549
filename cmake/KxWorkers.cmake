# The multi-worker engine module (libkx_workers.so), loaded by libkx at run time like the CUDA module:
# Gloo (Debian: libgloo-dev) carries the tensors between processes; Open MPI's mpi.h (libopenmpi-dev)
# lets mpirun launches bootstrap through MPI, whose library the module opens only when launched so.
# libkx links neither. KX_WITH_GLOO / KX_WITH_MPI: AUTO builds what is found, ON fails without it.
#
# Sets KX_HAVE_GLOO, KX_WORKERS_MPI_INCLUDE_DIR (empty without MPI) and KX_WORKERS_STATUS.
function(kx_find_workers_engine)
  set(KX_HAVE_GLOO OFF PARENT_SCOPE)
  set(KX_WORKERS_MPI_INCLUDE_DIR "" PARENT_SCOPE)
  if(KX_WITH_GLOO STREQUAL "OFF")
    if(KX_WITH_MPI STREQUAL "ON")
      message(FATAL_ERROR "KX_WITH_MPI=ON needs the multi-worker module, which KX_WITH_GLOO=OFF turns off")
    endif()
    set(KX_WORKERS_STATUS "off" PARENT_SCOPE)
    return()
  endif()

  find_package(Gloo CONFIG QUIET)
  if(NOT TARGET gloo OR NOT EXISTS "${GLOO_INCLUDE_DIRS}/gloo/transport/tcp/device.h")
    if(KX_WITH_GLOO STREQUAL "ON" OR KX_WITH_MPI STREQUAL "ON")
      message(FATAL_ERROR "KX_WITH_GLOO=ON (or KX_WITH_MPI=ON) but no Gloo with its TCP transport was found "
                          "(install libgloo-dev)")
    endif()
    set(KX_WORKERS_STATUS "no Gloo found (libgloo-dev)" PARENT_SCOPE)
    return()
  endif()
  set(KX_HAVE_GLOO ON PARENT_SCOPE)

  set(mpi_status "no mpirun bootstrap")
  if(NOT KX_WITH_MPI STREQUAL "OFF")
    # Open MPI's own header (the module resolves its globals by Open MPI's names); not MPICH's.
    find_path(KX_OPENMPI_INCLUDE_DIR mpi.h
              PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openmpi/include /usr/include/${CMAKE_LIBRARY_ARCHITECTURE}/openmpi
                    /usr/include/openmpi /usr/lib64/openmpi/include
              NO_DEFAULT_PATH)
    if(KX_OPENMPI_INCLUDE_DIR)
      file(STRINGS "${KX_OPENMPI_INCLUDE_DIR}/mpi.h" open_mpi_line REGEX "^#define OPEN_MPI 1")
    endif()
    if(KX_OPENMPI_INCLUDE_DIR AND open_mpi_line)
      set(KX_WORKERS_MPI_INCLUDE_DIR ${KX_OPENMPI_INCLUDE_DIR} PARENT_SCOPE)
      set(mpi_status "mpirun bootstrap (Open MPI's libmpi.so.40 opened at run time)")
    elseif(KX_WITH_MPI STREQUAL "ON")
      message(FATAL_ERROR "KX_WITH_MPI=ON but Open MPI's mpi.h was not found (install libopenmpi-dev)")
    else()
      set(mpi_status "no Open MPI mpi.h found (libopenmpi-dev): TF_CONFIG launches only")
    endif()
  endif()
  set(KX_WORKERS_STATUS "module (Gloo ${GLOO_VERSION}, ${mpi_status})" PARENT_SCOPE)
endfunction()
