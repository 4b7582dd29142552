# The Python extension module tiergym._core (env/python/_core/, nanobind): the in-process
# vector environment. `pip install .` builds it (pyproject.toml: nanobind is a build
# requirement, TIERGYM_BUILD_PYTHON_EXT=ON) and installs it into the package. A plain CMake
# build builds it when the Python interpreter CMake finds has nanobind (`python -m nanobind
# --cmake_dir`; pick the interpreter with -DPython_EXECUTABLE=.venv/bin/python), and
# otherwise leaves it out: nanobind is optional there, and the rest builds as before.
#
# Every library is compiled position-independent, with or without the extension (which
# links the static layers into a shared module): the objects of `pip install` and of
# scripts/build.sh are then the same, and ccache serves one to the other.
set(CMAKE_POSITION_INDEPENDENT_CODE ON)

set(TIERGYM_NANOBIND_DIR "")
if(NOT TIERGYM_PROFILER_ONLY AND NOT TIERGYM_BUILD_FUZZERS)
  find_package(Python 3.9 COMPONENTS Interpreter Development.Module QUIET)
  if(Python_FOUND)
    execute_process(COMMAND ${Python_EXECUTABLE} -m nanobind --cmake_dir
                    OUTPUT_VARIABLE TIERGYM_NANOBIND_DIR OUTPUT_STRIP_TRAILING_WHITESPACE
                    ERROR_QUIET RESULT_VARIABLE _tiergym_nb_rc)
    if(NOT _tiergym_nb_rc EQUAL 0)
      set(TIERGYM_NANOBIND_DIR "")
    endif()
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
if(TIERGYM_BUILD_PYTHON_EXT AND (TIERGYM_PROFILER_ONLY OR TIERGYM_BUILD_FUZZERS))
  message(STATUS "tiergym: TIERGYM_BUILD_PYTHON_EXT is ignored in profiler-only and fuzzer builds")
  set(TIERGYM_BUILD_PYTHON_EXT OFF)
endif()
if(TIERGYM_BUILD_PYTHON_EXT)
  if(NOT TIERGYM_NANOBIND_DIR)
    message(FATAL_ERROR "TIERGYM_BUILD_PYTHON_EXT is ON but `${Python_EXECUTABLE} -m nanobind "
                        "--cmake_dir` failed: pip install nanobind into that interpreter, or "
                        "set -DPython_EXECUTABLE=, or -DTIERGYM_BUILD_PYTHON_EXT=OFF")
  endif()
  # Where this configuration's interpreter has it (pip's isolated build environments move
  # from one install to the next; a cached directory from an earlier one may be gone).
  set(nanobind_DIR ${TIERGYM_NANOBIND_DIR} CACHE PATH "nanobind's CMake package" FORCE)
  find_package(nanobind CONFIG REQUIRED)
  message(STATUS "tiergym: building the Python extension tiergym._core for ${Python_EXECUTABLE}")
else()
  message(STATUS "tiergym: not building the Python extension tiergym._core (no nanobind for "
                 "the Python found, or TIERGYM_BUILD_PYTHON_EXT=OFF)")
endif()
