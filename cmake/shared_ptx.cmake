# Shared PTX: a unit whose device code is the same for every architecture is compiled by cicc once,
# as the lowest architecture's PTX, and ptxas turns that PTX into each architecture's machine code
# (nvcc --generate-code=arch=compute_80,code=[sm_80,sm_90,compute_80]). With the default 80;90 that
# is one front end and optimizer run per unit instead of two: about a fifth of a unit's compile
# time. The units whose code differs by architecture (cluster, PDL, mbarrier and fp8 paths) are
# listed in cmake/per_arch_units.cmake and compiled once per architecture as before; a unit that
# needs to be listed and is not fails to compile (cuda/common/per_arch.cuh says why).
# tools/shared_ptx_check.py compares a build's shared units with per-architecture compiles, kernel
# by kernel (docs/build.md).
include(${CMAKE_CURRENT_LIST_DIR}/per_arch_units.cmake)

# baracuda_shared_ptx(<target> <archs>): per-source --generate-code flags for the target's CUDA
# units (the target's own CUDA_ARCHITECTURES becomes OFF). Left as CMake's per-target flags when it
# would save nothing (one architecture), or when an entry is not of the form NN, NN-real, NN-virtual
# with NN >= 80 (the per_arch.cuh guards assume sm_80 is the lowest).
function(baracuda_shared_ptx target archs)
  set(_real "")          # the SASS targets (sm_NN)
  set(_any_ptx OFF)      # whether any PTX was asked for
  set(_lowest "")
  set(_per_arch_flags "")  # what CMake writes for CUDA_ARCHITECTURES, for the listed units
  foreach(_a ${archs})
    if(NOT _a MATCHES "^([0-9]+)(-real|-virtual)?$")
      message(STATUS "baracuda: shared PTX off ('${_a}' in the architectures)")
      return()
    endif()
    set(_n ${CMAKE_MATCH_1})
    if(_n LESS 80)
      message(STATUS "baracuda: shared PTX off (architecture ${_n} < 80)")
      return()
    endif()
    if(CMAKE_MATCH_2 STREQUAL "-real")
      set(_codes sm_${_n})
    elseif(CMAKE_MATCH_2 STREQUAL "-virtual")
      set(_codes compute_${_n})
    else()
      set(_codes compute_${_n},sm_${_n})
    endif()
    list(APPEND _per_arch_flags "--generate-code=arch=compute_${_n},code=[${_codes}]")
    if(NOT CMAKE_MATCH_2 STREQUAL "-virtual")
      list(APPEND _real sm_${_n})
    endif()
    if(NOT CMAKE_MATCH_2 STREQUAL "-real")
      set(_any_ptx ON)
    endif()
    if(NOT _lowest OR _n LESS _lowest)
      set(_lowest ${_n})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES _real)
  list(LENGTH _real _nreal)
  if(_nreal LESS 2)
    return()
  endif()
  # shared: the lowest PTX, every real arch's SASS, and that PTX embedded when any PTX was asked for
  if(_any_ptx)
    list(APPEND _real compute_${_lowest})
  endif()
  string(REPLACE ";" "," _codes "${_real}")
  set(_shared_flag "--generate-code=arch=compute_${_lowest},code=[${_codes}]")
  set(_listed "")
  foreach(_pattern ${BARACUDA_PER_ARCH_UNITS})
    file(GLOB _units ${CMAKE_CURRENT_SOURCE_DIR}/${_pattern})
    list(APPEND _listed ${_units})
  endforeach()
  get_target_property(_srcs ${target} SOURCES)
  set(_nshared 0)
  foreach(_src ${_srcs})
    if(NOT _src MATCHES "\\.cu$")
      continue()
    endif()
    if(_src IN_LIST _listed)
      set_property(SOURCE ${_src} APPEND PROPERTY COMPILE_OPTIONS ${_per_arch_flags})
    else()
      set_property(SOURCE ${_src} APPEND PROPERTY COMPILE_OPTIONS ${_shared_flag})
      set_property(SOURCE ${_src} APPEND PROPERTY COMPILE_DEFINITIONS BARACUDA_SHARED_PTX=1)
      math(EXPR _nshared "${_nshared} + 1")
    endif()
  endforeach()
  set_target_properties(${target} PROPERTIES CUDA_ARCHITECTURES OFF)
  message(STATUS "baracuda: shared PTX for ${_nshared} CUDA units (${_shared_flag}); the others per architecture")
endfunction()
