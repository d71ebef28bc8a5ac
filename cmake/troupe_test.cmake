# troupe_add_test(NAME <name> SOURCES <files...> [LABELS <labels...>] [TIMEOUT <s>])
# One small test binary per concern, linked with GoogleTest and libtroupe, registered with
# ctest. Labels: unit (no model), model (needs a model file), tokenizer, cli, server, slow.
# The `slow` label is skipped in the sanitizer build.
function(troupe_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE troupe GTest::gtest GTest::gtest_main)
  target_include_directories(${T_NAME} PRIVATE ${CMAKE_SOURCE_DIR}/tests)
  target_compile_definitions(${T_NAME} PRIVATE
    TROUPE_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
    TROUPE_SHARED_MODELS_DIR="${TROUPE_SHARED_MODELS_DIR}"
    TROUPE_VOCAB_CACHE_DIR="${TROUPE_VOCAB_CACHE_DIR}"
    TROUPE_CLI_PATH="$<TARGET_FILE:troupe-cli>")
  add_test(NAME ${T_NAME} COMMAND ${T_NAME})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT})
endfunction()
