# Test topologies: the recorded corpus (other projects' files, never copied into this tree)
# and the generated GPU-node shapes (tests/tools/gen_topology.py --preset NAME).
#
# NUMABIND_TOPOLOGY_CORPUS: the corpus directory (INDEX.md, expected_gpu_locality.json,
# *.xml). Default: the environment variable of that name at configure time, else
# ../shared/topologies beside the source tree, made absolute here. Tests, benchmarks and
# fuzz seeds also honour the environment variable at run time; where the directory is
# absent, exactly the corpus tests are skipped, naming the variable.
include_guard(DIRECTORY)

if(DEFINED ENV{NUMABIND_TOPOLOGY_CORPUS} AND NOT "$ENV{NUMABIND_TOPOLOGY_CORPUS}" STREQUAL "")
  set(_nb_corpus_default "$ENV{NUMABIND_TOPOLOGY_CORPUS}")
else()
  set(_nb_corpus_default "${PROJECT_SOURCE_DIR}/../shared/topologies")
endif()
set(NUMABIND_TOPOLOGY_CORPUS "${_nb_corpus_default}" CACHE PATH
    "Recorded hwloc XML corpus (INDEX.md, expected_gpu_locality.json); tests needing it skip without it")
get_filename_component(NUMABIND_TOPOLOGY_CORPUS_ABS "${NUMABIND_TOPOLOGY_CORPUS}" ABSOLUTE
                       BASE_DIR "${PROJECT_SOURCE_DIR}")
set(NUMABIND_CORPUS_PRESENT OFF)
if(EXISTS "${NUMABIND_TOPOLOGY_CORPUS_ABS}/expected_gpu_locality.json")
  set(NUMABIND_CORPUS_PRESENT ON)
endif()

# Corpus file lists fixed at configure time, so that test names do not depend on whether
# the corpus is there when the tests run (then they skip one by one):
#   NUMABIND_CORPUS_XMLS      every *.xml at the top of the corpus
#   NUMABIND_CORPUS_GPU_XMLS  the files expected_gpu_locality.json lists with a compute GPU
set(NUMABIND_CORPUS_XMLS "")
set(NUMABIND_CORPUS_GPU_XMLS "")
if(NUMABIND_CORPUS_PRESENT)
  file(GLOB _nb_xmls RELATIVE "${NUMABIND_TOPOLOGY_CORPUS_ABS}" "${NUMABIND_TOPOLOGY_CORPUS_ABS}/*.xml")
  list(SORT _nb_xmls)
  set(NUMABIND_CORPUS_XMLS ${_nb_xmls})
  file(READ "${NUMABIND_TOPOLOGY_CORPUS_ABS}/expected_gpu_locality.json" _nb_json)
  string(JSON _nb_n LENGTH "${_nb_json}")
  math(EXPR _nb_last "${_nb_n} - 1")
  foreach(_i RANGE ${_nb_last})
    string(JSON _nb_file MEMBER "${_nb_json}" ${_i})
    if(_nb_file MATCHES "/" OR NOT EXISTS "${NUMABIND_TOPOLOGY_CORPUS_ABS}/${_nb_file}")
      continue()
    endif()
    string(JSON _nb_ng LENGTH "${_nb_json}" "${_nb_file}" gpus)
    set(_nb_compute OFF)
    if(_nb_ng GREATER 0)
      math(EXPR _nb_glast "${_nb_ng} - 1")
      foreach(_g RANGE ${_nb_glast})
        string(JSON _nb_c GET "${_nb_json}" "${_nb_file}" gpus ${_g} compute)
        if(_nb_c)
          set(_nb_compute ON)
        endif()
      endforeach()
    endif()
    if(_nb_compute)
      list(APPEND NUMABIND_CORPUS_GPU_XMLS "${_nb_file}")
    endif()
  endforeach()
  list(SORT NUMABIND_CORPUS_GPU_XMLS)
  list(LENGTH NUMABIND_CORPUS_XMLS _nb_nx)
  list(LENGTH NUMABIND_CORPUS_GPU_XMLS _nb_ngx)
  set(_nb_corpus_line "Topology corpus: ${NUMABIND_TOPOLOGY_CORPUS_ABS} (${_nb_nx} XML files, ${_nb_ngx} with GPUs)")
else()
  string(CONCAT _nb_corpus_line "Topology corpus not found at ${NUMABIND_TOPOLOGY_CORPUS_ABS}: corpus tests "
         "will be skipped (set NUMABIND_TOPOLOGY_CORPUS to the directory of INDEX.md and expected_gpu_locality.json)")
endif()
get_property(_nb_reported GLOBAL PROPERTY NUMABIND_CORPUS_REPORTED)
if(NOT _nb_reported)
  message(STATUS "${_nb_corpus_line}")
  set_property(GLOBAL PROPERTY NUMABIND_CORPUS_REPORTED ON)
endif()
# As C++ string literals: "a.xml,b.xml"
string(REPLACE ";" "," NUMABIND_CORPUS_XMLS_CSV "${NUMABIND_CORPUS_XMLS}")
string(REPLACE ";" "," NUMABIND_CORPUS_GPU_XMLS_CSV "${NUMABIND_CORPUS_GPU_XMLS}")

# ---- generated topologies ----
set(NUMABIND_GEN_TOPOLOGY "${PROJECT_SOURCE_DIR}/tests/tools/gen_topology.py")
find_package(Python3 COMPONENTS Interpreter REQUIRED)
find_program(NUMABIND_LSTOPO_NO_GRAPHICS NAMES lstopo-no-graphics lstopo)
set_property(DIRECTORY "${PROJECT_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${NUMABIND_GEN_TOPOLOGY}")
execute_process(COMMAND "${Python3_EXECUTABLE}" "${NUMABIND_GEN_TOPOLOGY}" --list-presets
                OUTPUT_VARIABLE _nb_presets RESULT_VARIABLE _nb_rc OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _nb_rc EQUAL 0)
  message(FATAL_ERROR "${NUMABIND_GEN_TOPOLOGY} --list-presets failed")
endif()
string(REPLACE "\n" ";" NUMABIND_TOPOLOGY_PRESETS "${_nb_presets}")
string(REPLACE ";" "," NUMABIND_TOPOLOGY_PRESETS_CSV "${NUMABIND_TOPOLOGY_PRESETS}")

# numabind_generated_topologies(TARGET DIR [XML_ONLY]): a target writing, for every preset at
# build time, DIR/<preset>.xml, DIR/<preset>.json (the generator's inputs) and, unless
# XML_ONLY, DIR/<preset>.hwloc.json (what hwloc-calc / hwloc-info say about the XML: the
# tests' expected values).
function(numabind_generated_topologies target dir)
  cmake_parse_arguments(arg "XML_ONLY" "" "" ${ARGN})
  if(NOT NUMABIND_LSTOPO_NO_GRAPHICS)
    message(WARNING "lstopo-no-graphics (Debian package hwloc) not found: no generated topologies in ${dir}; "
                    "the tests that use them will fail")
    add_custom_target(${target})
    return()
  endif()
  set(oracle "${PROJECT_SOURCE_DIR}/tests/tools/hwloc_oracle.py")
  set(outputs "")
  foreach(p IN LISTS NUMABIND_TOPOLOGY_PRESETS)
    set(files "${dir}/${p}.xml" "${dir}/${p}.json")
    set(commands COMMAND "${Python3_EXECUTABLE}" "${NUMABIND_GEN_TOPOLOGY}" --preset ${p} -o "${dir}/${p}.xml"
                         --facts "${dir}/${p}.json")
    if(NOT arg_XML_ONLY)
      list(APPEND files "${dir}/${p}.hwloc.json")
      list(APPEND commands COMMAND "${Python3_EXECUTABLE}" "${oracle}" "${dir}/${p}.xml" -o "${dir}/${p}.hwloc.json")
    endif()
    add_custom_command(
      OUTPUT ${files}
      COMMAND ${CMAKE_COMMAND} -E make_directory "${dir}"
      ${commands}
      DEPENDS "${NUMABIND_GEN_TOPOLOGY}" "${oracle}"
      COMMENT "gen_topology.py --preset ${p}"
      VERBATIM)
    list(APPEND outputs ${files})
  endforeach()
  add_custom_target(${target} ALL DEPENDS ${outputs})
endfunction()
