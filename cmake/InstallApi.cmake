# cmake/InstallApi.cmake — install rules of the C API and the Python module.
#
#   PREFIX/LIBDIR/libnumabind.so.0.1.0, libnumabind.so.0   the shared library (component runtime)
#   PREFIX/LIBDIR/libnumabind.so                           its link name      (component devel)
#   PREFIX/include/numabind/numabind.h                     (Install.cmake's include/ rule, devel)
#   PYTHON_DIR/numabind/{__init__,__main__,_library,_install_paths}.py, py.typed
#                                                          the Python module  (component runtime)
#
# PYTHON_DIR: NUMABIND_PYTHON_INSTALL_DIR when set (absolute, or relative to the prefix: the RPM
# passes %{python3_sitelib}); else found at install time, for the prefix installed to (cpack
# and DESTDIR included), among the directories NUMABIND_PYTHON (default /usr/bin/python3)
# imports from: PREFIX/lib/python3/dist-packages for Debian's /usr, .../python3.X/dist-packages
# for /usr/local, .../site-packages elsewhere (cmake/python_site.py). When that interpreter
# searches none under the prefix, the install says which PYTHONPATH to set.
# _install_paths.py records the installed library's path, so the module finds it even where
# the loader's cache does not know PREFIX/LIBDIR yet (no ldconfig after cmake --install).
set(NUMABIND_PYTHON_INSTALL_DIR "" CACHE STRING
    "Where the Python module numabind is installed (empty: where NUMABIND_PYTHON imports from under the prefix)")
if(EXISTS /usr/bin/python3)
  set(_nb_default_python /usr/bin/python3)
else()
  find_program(_nb_default_python NAMES python3)
endif()
set(NUMABIND_PYTHON "${_nb_default_python}" CACHE FILEPATH
    "The Python interpreter whose module path the numabind module is installed into")
install(TARGETS numabind_shared
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_SKIP)
install(TARGETS numabind_shared
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT devel NAMELINK_ONLY)
install(CODE "
  set(_nb_python_dir [[${NUMABIND_PYTHON_INSTALL_DIR}]])
  if(_nb_python_dir STREQUAL \"\")
    execute_process(COMMAND [[${NUMABIND_PYTHON}]] [[${CMAKE_CURRENT_SOURCE_DIR}/cmake/python_site.py]]
                            \"\${CMAKE_INSTALL_PREFIX}\"
                    OUTPUT_VARIABLE _nb_python_dir OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _nb_rc)
    if(NOT _nb_rc EQUAL 0 OR _nb_python_dir STREQUAL \"\")
      set(_nb_python_dir \"unsearched:\${CMAKE_INSTALL_PREFIX}/lib/python3/dist-packages\")
    endif()
  elseif(NOT IS_ABSOLUTE \"\${_nb_python_dir}\")
    set(_nb_python_dir \"\${CMAKE_INSTALL_PREFIX}/\${_nb_python_dir}\")
  endif()
  if(_nb_python_dir MATCHES \"^unsearched:(.*)\")
    set(_nb_python_dir \"\${CMAKE_MATCH_1}\")
    message(STATUS \"numabind: the Python module goes to \${_nb_python_dir}, which [[${NUMABIND_PYTHON}]] does not \"
                   \"search: export PYTHONPATH=\${_nb_python_dir} (or pip install --no-build-isolation ./python)\")
  endif()
  set(_nb_paths \"${CMAKE_BINARY_DIR}/python/_install_paths.py\")
  file(WRITE \"\${_nb_paths}\" \"# Written by cmake --install: where the numabind library was installed.\\n\"
       \"LIBRARIES = [\\\"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/libnumabind.so.0\\\"]\\n\")
  file(INSTALL ${_nb_py_sources} \"\${_nb_paths}\" DESTINATION \"\${_nb_python_dir}/numabind\")
" COMPONENT runtime)
