# The Python extension module tiergym._core (env/python/_core/, nanobind): built when
# TIERGYM_BUILD_PYTHON_EXT is ON, which it is by default when a Python interpreter with
# nanobind is found (`python -m nanobind --cmake_dir`; pick the interpreter with
# -DPython_EXECUTABLE=.venv/bin/python). Without nanobind the option is OFF, the rest builds
# as before and the Python tests of the extension are skipped with that reason.
# The extension links the static layers into a shared module, so with it every library is
# compiled position-independent.
find_package(Python 3.9 COMPONENTS Interpreter Development.Module QUIET)
set(TIERGYM_NANOBIND_DIR "")
if(Python_FOUND)
  execute_process(COMMAND ${Python_EXECUTABLE} -m nanobind --cmake_dir
                  OUTPUT_VARIABLE TIERGYM_NANOBIND_DIR OUTPUT_STRIP_TRAILING_WHITESPACE
                  ERROR_QUIET RESULT_VARIABLE _tiergym_nb_rc)
  if(NOT _tiergym_nb_rc EQUAL 0)
    set(TIERGYM_NANOBIND_DIR "")
  endif()
endif()
if(TIERGYM_NANOBIND_DIR)
  set(_tiergym_ext_default ON)
else()
  set(_tiergym_ext_default OFF)
endif()
option(TIERGYM_BUILD_PYTHON_EXT
       "Build the in-process Python extension tiergym._core (needs nanobind)"
       ${_tiergym_ext_default})
if(TIERGYM_BUILD_PYTHON_EXT AND TIERGYM_PROFILER_ONLY)
  set(TIERGYM_BUILD_PYTHON_EXT OFF)
endif()
if(TIERGYM_BUILD_PYTHON_EXT)
  if(NOT TIERGYM_NANOBIND_DIR)
    message(FATAL_ERROR "TIERGYM_BUILD_PYTHON_EXT is ON but `${Python_EXECUTABLE} -m nanobind "
                        "--cmake_dir` failed: pip install nanobind into that interpreter, or "
                        "set -DPython_EXECUTABLE=, or -DTIERGYM_BUILD_PYTHON_EXT=OFF")
  endif()
  list(APPEND CMAKE_PREFIX_PATH ${TIERGYM_NANOBIND_DIR})
  find_package(nanobind CONFIG REQUIRED)
  set(CMAKE_POSITION_INDEPENDENT_CODE ON)
  message(STATUS "tiergym: building the Python extension tiergym._core for ${Python_EXECUTABLE}")
else()
  message(STATUS "tiergym: not building the Python extension tiergym._core (no nanobind for "
                 "${Python_EXECUTABLE}, or TIERGYM_BUILD_PYTHON_EXT=OFF)")
endif()
