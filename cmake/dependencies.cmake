# All third-party code comes from Debian bookworm packages (see scripts/setup.sh).
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(hwy REQUIRED)                 # libhwy-dev: portable SIMD, runtime dispatch
find_package(nlohmann_json 3.10 REQUIRED)  # nlohmann-json3-dev
find_package(CLI11 REQUIRED)               # libcli11-dev
find_package(yaml-cpp REQUIRED)            # libyaml-cpp-dev
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)   # libxxhash-dev
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)   # libpcre2-dev
pkg_check_modules(HTTPLIB IMPORTED_TARGET cpp-httplib)         # libcpp-httplib-dev (server)
if(TROUPE_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(TROUPE_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
