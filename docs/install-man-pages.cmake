# Installs the man pages built in tpmkey_man_built (set by docs/CMakeLists.txt,
# as are the other tpmkey_* variables) into MANDIR/manN. A page names the
# module, the programs and the docs by their paths under the configured
# prefix; when `cmake --install --prefix P` installs elsewhere, those paths
# are rewritten to P's, so that an installed page never names a path the
# installation does not have.
foreach(var libdir bindir docdir mandir)
  if(IS_ABSOLUTE "${tpmkey_${var}}")
    set(configured_${var} "${tpmkey_${var}}")
    set(installed_${var} "${tpmkey_${var}}")
  else()
    set(configured_${var} "${tpmkey_configured_prefix}/${tpmkey_${var}}")
    set(installed_${var} "${CMAKE_INSTALL_PREFIX}/${tpmkey_${var}}")
  endif()
endforeach()
foreach(page IN LISTS tpmkey_man_pages)
  string(REGEX REPLACE ".*\\.([0-9])$" "\\1" section "${page}")
  file(READ "${tpmkey_man_built}/${page}" text)
  string(REPLACE "${configured_libdir}/pkcs11/" "${installed_libdir}/pkcs11/" text "${text}")
  string(REPLACE "${configured_docdir}/" "${installed_docdir}/" text "${text}")
  string(REPLACE "${configured_bindir}/" "${installed_bindir}/" text "${text}")
  set(dest "${installed_mandir}/man${section}/${page}")
  message(STATUS "Installing: $ENV{DESTDIR}${dest}")
  file(MAKE_DIRECTORY "$ENV{DESTDIR}${installed_mandir}/man${section}")
  file(WRITE "$ENV{DESTDIR}${dest}" "${text}")
  list(APPEND CMAKE_INSTALL_MANIFEST_FILES "${dest}")
endforeach()
