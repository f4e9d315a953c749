# ctest driver: the installed headers are the public API alone. It installs the build tree into a
# scratch prefix, then
#  1. fails when an installed header defines or declares the plugin ABI (the *Impl classes,
#     Backend, register_backend, kBackendAbiVersion, galley_plugin_register): those live in
#     src/runtime/backend.hpp; a public header may only forward-declare an Impl it must name;
#  2. compiles every installed header alone in a downstream project that finds Galley with
#     find_package, so none needs an internal header or another include before it.
# With -DSELF_TEST=ON it instead runs check 1 on a made-up header that defines StreamImpl and fails
# unless the check reports it, so the check itself is known to catch what it is for.

# Lines of the headers under `dir` that name the ABI other than by a forward declaration, as
# "path:line: text" in `out_var` (empty when clean). Comment lines are skipped.
function(find_abi_names dir out_var)
  file(GLOB_RECURSE headers ${dir}/*.hpp ${dir}/*.h)
  set(found)
  foreach(header IN LISTS headers)
    file(STRINGS ${header} lines)
    set(number 0)
    foreach(line IN LISTS lines)
      math(EXPR number "${number} + 1")
      set(hit FALSE)
      string(STRIP "${line}" text)
      if(text MATCHES "^//")
        continue()  # a comment may name the ABI (e.g. when a solver registers); code may not
      endif()
      # class XImpl { / class XImpl : base / class XImpl final
      if(line MATCHES "(class|struct)[ \t]+(DeviceImpl|StreamImpl|EventImpl|GraphImpl|Backend)[ \t]*([{:]|final|$)")
        set(hit TRUE)
      endif()
      if(line MATCHES "galley_plugin_register|kBackendAbiVersion|register_backend")
        set(hit TRUE)
      endif()
      if(line MATCHES "#include[ \t]+[\"<](runtime/backend\\.hpp|galley/runtime/backend\\.hpp)")
        set(hit TRUE)
      endif()
      if(hit)
        list(APPEND found "${header}:${number}: ${text}")
      endif()
    endforeach()
  endforeach()
  set(${out_var} "${found}" PARENT_SCOPE)
endfunction()

set(work ${GALLEY_BINARY_DIR}/installed-headers-test)
file(REMOVE_RECURSE ${work})

if(SELF_TEST)
  file(WRITE ${work}/include/galley/leaky.hpp
    "#pragma once\nnamespace galley::runtime {\nclass StreamImpl;\nclass StreamImpl {\n public:\n  virtual ~StreamImpl() = default;\n};\n// galley_plugin_register, named in a comment\n}\n")
  find_abi_names(${work}/include found)
  list(LENGTH found count)
  if(NOT count EQUAL 1 OR NOT found MATCHES "leaky.hpp:4: class StreamImpl {")
    message(FATAL_ERROR "the ABI check missed a StreamImpl definition or flagged a forward "
                        "declaration; it reported: ${found}")
  endif()
  message(STATUS "the ABI check reports a made-up leak: ${found}")
  return()
endif()

set(prefix ${work}/prefix)
execute_process(COMMAND ${CMAKE_COMMAND} --install ${GALLEY_BINARY_DIR} --prefix ${prefix}
  RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "install failed: ${rc}")
endif()

find_abi_names(${prefix}/include found)
if(found)
  list(JOIN found "\n  " lines)
  message(FATAL_ERROR "installed headers expose the plugin ABI (move it to src/runtime/backend.hpp; "
                      "a public header may only forward-declare an Impl):\n  ${lines}")
endif()

# One translation unit per installed header, each including only that header.
file(GLOB_RECURSE headers RELATIVE ${prefix}/include ${prefix}/include/galley/*.hpp)
list(LENGTH headers header_count)
if(header_count EQUAL 0)
  message(FATAL_ERROR "no headers installed under ${prefix}/include/galley")
endif()
set(project ${work}/consumer)
set(sources)
foreach(header IN LISTS headers)
  string(MAKE_C_IDENTIFIER ${header} name)
  file(WRITE ${project}/${name}.cpp "#include \"${header}\"\n")
  list(APPEND sources ${name}.cpp)
endforeach()
list(JOIN sources " " source_list)
file(WRITE ${project}/CMakeLists.txt
  "cmake_minimum_required(VERSION 3.25)\n"
  "project(galley_header_check LANGUAGES CXX)\n"
  "find_package(galley REQUIRED)\n"
  "add_library(each_header_alone OBJECT ${source_list})\n"
  "target_link_libraries(each_header_alone PRIVATE galley::galley)\n")
execute_process(COMMAND ${CMAKE_COMMAND} -S ${project} -B ${work}/build -G Ninja
  -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configure of the header check failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${work}/build RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "an installed header does not compile alone (see the errors above): ${rc}")
endif()
message(STATUS "${header_count} installed headers compile alone and name no plugin ABI")
