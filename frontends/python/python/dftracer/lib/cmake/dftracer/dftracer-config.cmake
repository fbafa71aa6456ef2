# CMake package of the dftracer-rs C/C++ API (dftracer-rs 0.1.0, DFTracer 2.2.0
# header). Relocatable: paths are relative to this file (PREFIX/lib/cmake/dftracer/).
#
#   find_package(dftracer REQUIRED)
#   target_link_libraries(app PRIVATE dftracer::dftracer_core)
#
# Targets: dftracer::dftracer_core (also named dftracer_core and dftracer, as older DFTracer
# packages called it); variables DFTRACER_INCLUDE_DIRS, DFTRACER_LIBRARIES,
# DFTRACER_PRELOAD_LIBRARY (the same library under the name LD_PRELOAD uses).
get_filename_component(_dftracer_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)

if(NOT TARGET dftracer::dftracer_core)
  add_library(dftracer::dftracer_core SHARED IMPORTED)
  set_target_properties(dftracer::dftracer_core PROPERTIES
    IMPORTED_LOCATION "${_dftracer_prefix}/lib/libdftracer_core.so"
    IMPORTED_SONAME "libdftracer_core.so"
    INTERFACE_INCLUDE_DIRECTORIES "${_dftracer_prefix}/include")
endif()
if(NOT TARGET dftracer_core)
  add_library(dftracer_core INTERFACE IMPORTED)
  set_target_properties(dftracer_core PROPERTIES INTERFACE_LINK_LIBRARIES dftracer::dftracer_core)
endif()
if(NOT TARGET dftracer)
  add_library(dftracer INTERFACE IMPORTED)
  set_target_properties(dftracer PROPERTIES INTERFACE_LINK_LIBRARIES dftracer::dftracer_core)
endif()
if(NOT TARGET dftracer::dftracer)
  add_library(dftracer::dftracer INTERFACE IMPORTED)
  set_target_properties(dftracer::dftracer PROPERTIES INTERFACE_LINK_LIBRARIES dftracer::dftracer_core)
endif()

set(DFTRACER_INCLUDE_DIRS "${_dftracer_prefix}/include")
set(DFTRACER_LIBRARY_DIRS "${_dftracer_prefix}/lib")
set(DFTRACER_LIBRARIES dftracer::dftracer_core)
set(DFTRACER_PRELOAD_LIBRARY "${_dftracer_prefix}/lib/libdftracer_preload.so")
set(dftracer_FOUND TRUE)
unset(_dftracer_prefix)
