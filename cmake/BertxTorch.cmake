# BertxTorch.cmake - finds LibTorch and defines what every LibTorch-using target of bertx links:
#   bertx_torch / bertx::torch   LibTorch's libraries and flags, plus the include shim below
#   bertx_install_rpath_torch(<targets>)  installed targets find a wheel's libraries
#   BERTX_TORCH_VERSION, BERTX_TORCH_CUDA, BERTX_TORCH_FROM_WHEEL   what was found (build_info, messages)
#
# Two LibTorch builds are supported:
#  - LibTorch 2.x from a Python torch package (the default preset: tools/setup's .venv, pinned in
#    tools/requirements-torch.txt): BERTX_TORCH_PYTHON names that Python; its torch.utils.cmake_prefix_path
#    is put first on CMAKE_PREFIX_PATH. The PyPI wheel is a CUDA build: libtorch_cuda and c10_cuda are
#    linked, CUDA is found from /usr/local/cuda at configure time.
#  - Debian's LibTorch 1.13 (preset `debian`): BERTX_TORCH_PYTHON empty, found in /usr.
#
# Why a shim: the wheel's torch/include carries its own fmt (12.x) and oneDNN (3.x) headers, searched before
# /usr/include, while Debian's spdlog 1.10 was built against Debian's fmt 9 and bertx's direct oneDNN calls
# link Debian's libdnnl.so.2 (2.6; the wheel's oneDNN is linked into libtorch_cpu with hidden symbols, so
# there is nothing of it to call). The shim folder holds links to Debian's `fmt` and `oneapi` folders and
# goes first (-I before LibTorch's -isystem), so every translation unit sees the headers of the libraries it
# links. tools/check_build_headers (ctest build_headers) reads the compiler's dependency records and fails
# the build if any wheel fmt/oneDNN header or any Debian LibTorch header reached a 2.x build.
include_guard(GLOBAL)

set(BERTX_TORCH_PYTHON "" CACHE FILEPATH
    "Python whose torch package provides LibTorch 2.x (empty: CMAKE_PREFIX_PATH or the system's LibTorch)")
if(BERTX_TORCH_PYTHON)
  execute_process(
    COMMAND ${BERTX_TORCH_PYTHON} -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE _bertx_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_VARIABLE _bertx_torch_err RESULT_VARIABLE _bertx_torch_rc)
  if(NOT _bertx_torch_rc EQUAL 0 OR NOT IS_DIRECTORY "${_bertx_torch_prefix}")
    message(FATAL_ERROR "BERTX_TORCH_PYTHON=${BERTX_TORCH_PYTHON}: cannot import torch (run tools/setup, which "
                        "installs the pinned torch into .venv; or configure with --preset debian): ${_bertx_torch_err}")
  endif()
  list(PREPEND CMAKE_PREFIX_PATH "${_bertx_torch_prefix}")
endif()

# Caffe2's CUDA set-up probes the local GPU with a try_run when no architecture list is given; that probe does
# not configure here (CMake 3.25, nvcc 13, no GPU) and bertx compiles no CUDA sources itself. 9.0: the H200.
set(TORCH_CUDA_ARCH_LIST "9.0" CACHE STRING "CUDA architectures for LibTorch's CUDA set-up (bertx compiles no .cu files)")
find_package(Torch REQUIRED)

set(BERTX_TORCH_VERSION "${Torch_VERSION}")
set(BERTX_TORCH_CUDA "")
if(TARGET torch_cuda)
  if(CUDAToolkit_VERSION_MAJOR)
    set(BERTX_TORCH_CUDA "${CUDAToolkit_VERSION_MAJOR}.${CUDAToolkit_VERSION_MINOR}")
  else()
    set(BERTX_TORCH_CUDA "${CUDA_VERSION}")
  endif()
endif()
get_filename_component(_bertx_torch_root "${TORCH_INSTALL_PREFIX}" REALPATH)
if(_bertx_torch_root MATCHES "^/usr(/local)?$")
  set(BERTX_TORCH_FROM_WHEEL OFF)
else()
  set(BERTX_TORCH_FROM_WHEEL ON)
endif()
if(BERTX_TORCH_PYTHON AND NOT BERTX_TORCH_FROM_WHEEL)
  message(FATAL_ERROR "BERTX_TORCH_PYTHON=${BERTX_TORCH_PYTHON} is set but LibTorch was found in ${_bertx_torch_root} "
                      "(the system's): delete build/CMakeCache.txt and configure again")
endif()
if(BERTX_TORCH_CUDA)
  message(STATUS "bertx: LibTorch ${BERTX_TORCH_VERSION} from ${_bertx_torch_root}, CUDA ${BERTX_TORCH_CUDA} linked")
else()
  message(STATUS "bertx: LibTorch ${BERTX_TORCH_VERSION} from ${_bertx_torch_root}, CPU only")
endif()

# --- the include shim (see the header comment) --------------------------------------------------------
set(BERTX_TORCH_SHIM_DIR "${CMAKE_BINARY_DIR}/torch-shim")
file(REMOVE_RECURSE "${BERTX_TORCH_SHIM_DIR}")
file(MAKE_DIRECTORY "${BERTX_TORCH_SHIM_DIR}")
if(BERTX_TORCH_FROM_WHEEL)
  include(${CMAKE_CURRENT_LIST_DIR}/BertxPlugin.cmake)
  bertx_system_header_shim("${BERTX_TORCH_SHIM_DIR}")
endif()

# --- libstdc++ ahead of LibTorch -----------------------------------------------------------------------
# The wheel is built with a newer GCC than Debian's and its libtorch*.so and libc10.so export the parts of
# libstdc++ they linked statically (std::filesystem, std::chrono tzdb, string streams). The loader binds a
# symbol to the first library in load order that defines it, and a plain link puts libstdc++.so.6 last:
# std::filesystem::remove_all in bertx then ran LibTorch's copy, which crashed. Naming libstdc++ first on
# every link line of this project (and of the SDK's consumers, bertxConfig.cmake) makes the system's
# libstdc++ the one definition for the executable and everything it loads (tests/unit/test_compat.cpp checks it).
if(BERTX_TORCH_FROM_WHEEL)
  set(BERTX_STDCXX_FIRST "SHELL:-Wl,--push-state,--no-as-needed -lstdc++ -Wl,--pop-state")
  add_link_options("${BERTX_STDCXX_FIRST}")
endif()

# Torch's CMake puts its flags on the `torch` target; make a lean interface for plugins. Installed, the SDK's
# bertxConfig.cmake defines the same target (bertx::torch) from the consumer's find_package(Torch).
add_library(bertx_torch INTERFACE)
target_include_directories(bertx_torch BEFORE INTERFACE $<BUILD_INTERFACE:${BERTX_TORCH_SHIM_DIR}>)
target_link_libraries(bertx_torch INTERFACE ${TORCH_LIBRARIES})
target_compile_options(bertx_torch INTERFACE -Wno-deprecated-declarations)
add_library(bertx::torch ALIAS bertx_torch)

# Installed binaries find a wheel's libraries (in site-packages, where the loader does not look) through their
# RPATH. CMAKE_INSTALL_RPATH_USE_LINK_PATH leaves the folder out when .venv sits inside the source tree.
function(bertx_install_rpath_torch)
  if(BERTX_TORCH_FROM_WHEEL)
    foreach(target IN LISTS ARGN)
      set_property(TARGET ${target} APPEND PROPERTY INSTALL_RPATH "${TORCH_INSTALL_PREFIX}/lib")
    endforeach()
  endif()
endfunction()
