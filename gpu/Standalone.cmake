# What a GPU program's standalone build (cmake -S calibration/collector, cmake -S sim/backends/cuda) sets up right
# after its project(... LANGUAGES CXX): the main build's C++ settings, CUDA for the GPU architectures asked for
# (-DCMAKE_CUDA_ARCHITECTURES=...; A100 and H100 by default, whose PTX runs on newer GPUs), the CUDA toolkit, and
# this folder's library ddlsim::gpu.
include(${CMAKE_CURRENT_LIST_DIR}/../cmake/DdlsimLanguage.cmake)
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES "80;90" CACHE STRING "GPU architectures of the CUDA targets")
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
add_subdirectory(${CMAKE_CURRENT_LIST_DIR} ${PROJECT_BINARY_DIR}/gpu)
