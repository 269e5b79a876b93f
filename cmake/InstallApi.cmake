# cmake/InstallApi.cmake — install rules of the C API and the Python module (issue 16).
#
#   PREFIX/LIBDIR/libnumabind.so.0.1.0, libnumabind.so.0   the shared library (component runtime)
#   PREFIX/LIBDIR/libnumabind.so                           its link name      (component devel)
#   PREFIX/include/numabind/numabind.h                     (Install.cmake's include/ rule, devel)
#   NUMABIND_PYTHON_DIR/numabind/__init__.py               the Python module  (component runtime)
#
# NUMABIND_PYTHON_DIR (cache, relative to the prefix): Debian's python3 dist-packages path
# lib/python3/dist-packages by default (what /usr/bin/python3 imports from with prefix /usr).
# The module finds the library through NUMABIND_LIBRARY, next to itself, the build tree, then
# the system's loader path (libnumabind.so.0 in LIBDIR).
set(NUMABIND_PYTHON_DIR "lib/python3/dist-packages" CACHE STRING
    "Where the Python module numabind is installed (relative to the prefix)")
install(TARGETS numabind_shared
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_SKIP)
install(TARGETS numabind_shared
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT devel NAMELINK_ONLY)
install(FILES python/numabind/__init__.py DESTINATION ${NUMABIND_PYTHON_DIR}/numabind COMPONENT runtime)
