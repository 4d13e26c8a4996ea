# How a test that needs a TPM is registered: one function for every layer,
# so each such test runs the same way (a private swtpm from with-swtpm, the
# same environment, 77 = skipped, labels to select it by). Included from
# test/CMakeLists.txt; docs/hacking.md, "Adding a test", shows its use.

set(TPMKEY_WITH_SWTPM ${PROJECT_SOURCE_DIR}/swtpm-fixtures/with-swtpm)

# What every test script may use: the built programs, the fixtures, and
# where `cmake --install` would put things (the tools tests check those).
set(TPMKEY_TEST_ENVIRONMENT
  TPMKEY_MODULE=$<TARGET_FILE:tpmkey-pkcs11>
  TPMKEY_SK=$<TARGET_FILE:tpmkey-sk>
  TPMKEY_KEYGEN=$<TARGET_FILE:tpmkey-keygen>
  TPMKEY_TOOL=$<TARGET_FILE:tpmkey>
  TPMKEY_CA=$<TARGET_FILE:tpmkey-ca>
  TPMKEY_FIXTURES=${PROJECT_SOURCE_DIR}/swtpm-fixtures
  TPMKEY_BUILD_DIR=${PROJECT_BINARY_DIR}
  TPMKEY_VERSION=${PROJECT_VERSION}
  TPMKEY_MAN_DIR=${PROJECT_BINARY_DIR}/docs/man
  TPMKEY_PREFIX=${CMAKE_INSTALL_PREFIX}
  TPMKEY_BINDIR=${CMAKE_INSTALL_FULL_BINDIR}
  TPMKEY_LIBDIR=${CMAKE_INSTALL_FULL_LIBDIR}
  TPMKEY_MANDIR=${CMAKE_INSTALL_FULL_MANDIR}
  TPMKEY_DOCDIR=${CMAKE_INSTALL_FULL_DOCDIR})

# Layers whose tests drive programs we did not write (ssh, pkcs11-tool,
# p11tool, openssl, ...) end to end: they also get the label e2e.
set(TPMKEY_E2E_LAYERS ssh clients tools)

# tpmkey_swtpm_test(NAME LAYER COMMAND cmd... [SWTPM opts...] [TIMEOUT s]
#                   [LABELS ...] [ENVIRONMENT ...] [PROPERTIES ...])
#   NAME         the whole test name; it starts with LAYER ("tools: list",
#                "ssh (OpenSSH latest): ssh-agent")
#   LAYER        tpm, module, ssh, clients, tools, security or hardening
#   COMMAND      run as `with-swtpm SWTPM-opts -- cmd...`
#   SWTPM        with-swtpm's options (--srk, --relaxed-da, --da M:R:L, --abrmd)
#   TIMEOUT      seconds (default 120)
#   LABELS       more labels besides swtpm, LAYER (and e2e for ssh, clients, tools)
#   ENVIRONMENT  more VAR=value besides TPMKEY_TEST_ENVIRONMENT
#   PROPERTIES   more test properties (e.g. FIXTURES_REQUIRED name)
# A COMMAND that runs a Catch2 program of ours ($<TARGET_FILE:x> first)
# with test filters ("[tag]" arguments): the filters are recorded for
# tpmkey_check_catch_filters(x).
function(tpmkey_swtpm_test name layer)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "TIMEOUT" "COMMAND;SWTPM;LABELS;ENVIRONMENT;PROPERTIES")
  if(arg_UNPARSED_ARGUMENTS OR NOT arg_COMMAND)
    message(FATAL_ERROR "tpmkey_swtpm_test(\"${name}\"): give COMMAND; not understood: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT name MATCHES "^${layer}[ :]")
    message(FATAL_ERROR "tpmkey_swtpm_test(\"${name}\" ${layer}): the name must start with the layer")
  endif()
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 120)
  endif()
  set(labels swtpm ${layer})
  if(layer IN_LIST TPMKEY_E2E_LAYERS)
    list(APPEND labels e2e)
  endif()
  list(APPEND labels ${arg_LABELS})
  list(REMOVE_DUPLICATES labels)

  set(environment ${TPMKEY_TEST_ENVIRONMENT} ${arg_ENVIRONMENT})

  add_test(NAME "${name}" COMMAND ${TPMKEY_WITH_SWTPM} ${arg_SWTPM} -- ${arg_COMMAND})
  set_tests_properties("${name}" PROPERTIES
    ENVIRONMENT "${environment}"
    SKIP_RETURN_CODE 77
    TIMEOUT ${arg_TIMEOUT}
    LABELS "${labels}"
    ${arg_PROPERTIES})

  list(GET arg_COMMAND 0 program)
  if(program MATCHES "^\\$<TARGET_FILE:([^>]+)>$")
    set(target ${CMAKE_MATCH_1})
    foreach(word IN LISTS arg_COMMAND)
      if(word MATCHES "^\\[")
        set_property(GLOBAL APPEND PROPERTY TPMKEY_CATCH_FILTERS_${target} "${word}")
      endif()
    endforeach()
  endif()
endfunction()

# tpmkey_check_catch_filters(TARGET): a test case of the Catch2 program
# TARGET that no registered test's filter selects would never run, and a
# filter that selects no case runs nothing: either fails the build (after
# TARGET is linked, and again whenever the filters change). Call it after
# the tpmkey_swtpm_test() calls that run TARGET.
function(tpmkey_check_catch_filters target)
  get_property(filters GLOBAL PROPERTY TPMKEY_CATCH_FILTERS_${target})
  set(stamp ${CMAKE_CURRENT_BINARY_DIR}/${target}.filters-checked)
  add_custom_command(OUTPUT ${stamp}
    COMMAND ${PROJECT_SOURCE_DIR}/test/lib/check-catch-filters $<TARGET_FILE:${target}> ${filters}
    COMMAND ${CMAKE_COMMAND} -E touch ${stamp}
    DEPENDS ${target} ${PROJECT_SOURCE_DIR}/test/lib/check-catch-filters
    COMMENT "Checking that the registered tests run every test case of ${target}"
    VERBATIM)
  add_custom_target(${target}-filters-checked ALL DEPENDS ${stamp})
endfunction()

# tpmkey_module_test_program(TARGET COMMAND_VAR SOURCE...): a Catch2
# program that uses the built module as any PKCS#11 application would:
# dlopen + C_GetFunctionList only, linking none of our code (docs/design.md,
# practice 11). test/module/main.cpp (options, the swtpm check, the test
# keys) and harness.cpp come with it. COMMAND_VAR is set to the command
# that runs it on the built module and keygen; a test adds its filters.
function(tpmkey_module_test_program target command_var)
  find_package(Threads REQUIRED)
  add_executable(${target}
    ${PROJECT_SOURCE_DIR}/test/module/main.cpp
    ${PROJECT_SOURCE_DIR}/test/module/harness.cpp
    ${ARGN})
  # tpmkey-version: only the header with the version the module must report.
  target_link_libraries(${target} PRIVATE tpmkey-version tpmkey-catch2 OpenSSL::Crypto ${CMAKE_DL_LIBS} Threads::Threads)
  target_include_directories(${target} SYSTEM PRIVATE ${P11KIT_INCLUDE_DIRS})
  target_compile_definitions(${target} PRIVATE TPMKEY_FIXTURES_DIR="${PROJECT_SOURCE_DIR}/swtpm-fixtures")
  tpmkey_harden(${target})
  tpmkey_test_code(${target})
  # The module and keygen must be built before the tests run, but are not linked.
  add_dependencies(${target} tpmkey-pkcs11 tpmkey-keygen)
  set(${command_var} $<TARGET_FILE:${target}>
    --module $<TARGET_FILE:tpmkey-pkcs11> --keygen $<TARGET_FILE:tpmkey-keygen> PARENT_SCOPE)
endfunction()
