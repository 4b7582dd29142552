# tiergym_add_layer: one library of the layer graph (README.md, "Layers"), with its own
# include root.
#
#   tiergym_add_layer(NAME [INTERFACE] [NO_INSTALL]
#     SOURCES a.cc ...            # compiled into NAME
#     HEADERS a.h ...             # public: reachable by NAME and by whatever links NAME
#     INTERNAL_HEADERS internal/x.h ...   # reachable by NAME (and its tests) only
#     GENERATED_HEADERS env/x/y.h ...      # public headers generated into the build
#     GENERATED_INTERNAL_HEADERS env/x/internal/z.h ...   # (TIERGYM_GENERATED_DIR, by their
#                                 # repository path: env/protocol/gen_protocol.py)
#     DEPS lib ...                # PUBLIC link: their headers become reachable too
#     PRIVATE_DEPS lib ...)       # PRIVATE link
#
# Headers keep their repository path as include path ("traces/trace.h"), but no target sees
# the source tree: each layer's headers are linked (symbolic links, as Bazel's
# virtual includes) into build/include/NAME/ and only that directory is on NAME's public
# include path. A header of a layer that a target does not link is therefore not found,
# and the include fails to compile: the layer graph is what target_link_libraries says.
# Installed (unless NO_INSTALL: command lines, test helpers), the library goes to
# <prefix>/lib, its public headers to <prefix>/include/tiergym/<path>, and it is exported as
# tiergym::<NAME without the tiergym_ prefix> (cmake/TiergymInstall.cmake); in the build
# tree the same name is an alias.

include(GNUInstallDirs)
set(TIERGYM_STAGED_INCLUDE_DIR ${CMAKE_BINARY_DIR}/include)
# Where code generated from the repository's declarations goes (env/protocol/gen_protocol.py).
set(TIERGYM_GENERATED_DIR ${CMAKE_BINARY_DIR}/generated)

# Links each of FILES (paths relative to the current source directory) into ROOT under its
# path relative to the project's source directory.
function(_tiergym_stage_headers root)
  foreach(header ${ARGN})
    set(source ${CMAKE_CURRENT_SOURCE_DIR}/${header})
    if(NOT EXISTS ${source})
      message(FATAL_ERROR "tiergym_add_layer: no header ${source}")
    endif()
    file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${source})
    get_filename_component(dir ${root}/${rel} DIRECTORY)
    file(MAKE_DIRECTORY ${dir})
    file(CREATE_LINK ${source} ${root}/${rel} SYMBOLIC)
  endforeach()
endfunction()

# Links each of FILES (repository paths of files generated into TIERGYM_GENERATED_DIR) into
# ROOT under that path.
function(_tiergym_stage_generated root)
  foreach(rel ${ARGN})
    get_filename_component(dir ${root}/${rel} DIRECTORY)
    file(MAKE_DIRECTORY ${dir})
    file(CREATE_LINK ${TIERGYM_GENERATED_DIR}/${rel} ${root}/${rel} SYMBOLIC)
  endforeach()
endfunction()

function(tiergym_add_layer name)
  cmake_parse_arguments(ARG "INTERFACE;NO_INSTALL" ""
                        "SOURCES;HEADERS;INTERNAL_HEADERS;GENERATED_HEADERS;GENERATED_INTERNAL_HEADERS;DEPS;PRIVATE_DEPS"
                        ${ARGN})
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "tiergym_add_layer(${name}): unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  set(public_root ${TIERGYM_STAGED_INCLUDE_DIR}/${name})
  set(internal_root ${TIERGYM_STAGED_INCLUDE_DIR}-internal/${name})
  file(REMOVE_RECURSE ${public_root} ${internal_root})
  file(MAKE_DIRECTORY ${public_root})
  _tiergym_stage_headers(${public_root} ${ARG_HEADERS})
  _tiergym_stage_generated(${public_root} ${ARG_GENERATED_HEADERS})
  if(ARG_INTERFACE)
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE
      $<BUILD_INTERFACE:${public_root}> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/tiergym>)
    target_link_libraries(${name} INTERFACE ${ARG_DEPS})
  else()
    add_library(${name} ${ARG_SOURCES})
    target_include_directories(${name} PUBLIC
      $<BUILD_INTERFACE:${public_root}> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/tiergym>)
    if(ARG_INTERNAL_HEADERS OR ARG_GENERATED_INTERNAL_HEADERS)
      _tiergym_stage_headers(${internal_root} ${ARG_INTERNAL_HEADERS})
      _tiergym_stage_generated(${internal_root} ${ARG_GENERATED_INTERNAL_HEADERS})
      target_include_directories(${name} PRIVATE ${internal_root})
    endif()
    target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  endif()
  string(REGEX REPLACE "^tiergym_" "" export_name ${name})
  set_target_properties(${name} PROPERTIES EXPORT_NAME ${export_name})
  add_library(tiergym::${export_name} ALIAS ${name})
  if(NOT ARG_NO_INSTALL)
    install(TARGETS ${name} EXPORT tiergymTargets
            ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
            LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
    foreach(header ${ARG_HEADERS})
      file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/${header})
      get_filename_component(rel_dir ${rel} DIRECTORY)
      install(FILES ${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tiergym/${rel_dir})
    endforeach()
    foreach(rel ${ARG_GENERATED_HEADERS})
      get_filename_component(rel_dir ${rel} DIRECTORY)
      install(FILES ${TIERGYM_GENERATED_DIR}/${rel}
              DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tiergym/${rel_dir})
    endforeach()
  endif()
endfunction()

# Makes the internal headers of LAYER reachable by TARGET (a test of LAYER's internals).
function(tiergym_use_internal_headers target layer)
  target_include_directories(${target} PRIVATE ${TIERGYM_STAGED_INCLUDE_DIR}-internal/${layer})
endfunction()
