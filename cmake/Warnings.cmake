# tpmkey_harden(target): the warnings and hardening flags every target of
# ours gets. Applied per target so third-party code is not affected.
function(tpmkey_harden target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion
    -Wnon-virtual-dtor -Wold-style-cast -Wcast-align -Woverloaded-virtual
    -Wdouble-promotion -Wformat=2 -Wimplicit-fallthrough
    -fstack-protector-strong -fstack-clash-protection -fcf-protection
    $<$<NOT:$<CONFIG:Debug>>:-D_FORTIFY_SOURCE=2>)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    target_compile_options(${target} PRIVATE -Wglobal-constructors -Wexit-time-destructors)
  endif()
  if(TPMKEY_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  target_link_options(${target} PRIVATE -Wl,-z,relro -Wl,-z,now -Wl,-z,noexecstack)
endfunction()

if(TPMKEY_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()

# tpmkey_test_code(target): a test program's own code is compiled without
# optimisation. Its speed is the TPM's and OpenSSH's, not its own, and at
# -O2 Catch2's macros made half of every build's time: ak_certificate_test.cpp
# took 21 s of CPU at -O2, 6 s at -O0 (10 s at the ASan tree's -O1). The
# product code it tests (the libraries it links, the module it loads) keeps
# the build's flags. _FORTIFY_SOURCE needs optimisation (glibc warns, and
# warnings are errors), so it goes with it, for this code only.
function(tpmkey_test_code target)
  target_compile_options(${target} PRIVATE -O0 -U_FORTIFY_SOURCE)
endfunction()
