# find_package(sparsert): imported targets sparsert::sparsert (shared) and
# sparsert::sparsert_static; headers srt.h, srt_model.h, ... on their include path.
include(CMakeFindDependencyMacro)
find_dependency(Threads)
include(${CMAKE_CURRENT_LIST_DIR}/sparsertTargets.cmake)
