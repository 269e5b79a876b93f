# cmake/Install.cmake — install rules, CMake package config, pkg-config file and CPack (.deb).
#
# Included at the end of the top CMakeLists.txt. What `cmake --install` puts where
# (PREFIX = CMAKE_INSTALL_PREFIX, or --prefix):
#
#   PREFIX/bin/numabind                                  the command          (component runtime)
#   <Slurm plugin dir>/spank_numabind.so                 the SPANK plugin     (component plugin)
#   <Slurm plugin dir>/numabind_stepd.so                 its step engine, loaded by the plugin
#   <plugstack.conf.d>/numabind.conf                     its plugstack entry  (component plugin)
#   PREFIX/include/numabind/{numabind.h,*.hpp} (the public API), PREFIX/LIBDIR/libnumabind{,_core,_sys,_hwloc}.a,
#   PREFIX/LIBDIR/cmake/numabind/numabind{Config,ConfigVersion,Targets}.cmake,
#   PREFIX/LIBDIR/pkgconfig/numabind.pc                  the library          (component devel)
#   PREFIX/share/man/man1/numabind.1, man8/spank_numabind.8                   (component man)
#   PREFIX/share/doc/numabind/{*.md,examples/}                                (component doc)
#
# Slurm plugin directory: NUMABIND_SLURM_PLUGIN_DIR (cache). Default: `pkg-config --variable=libdir
# slurm`/slurm when Slurm ships a slurm.pc, else the directory that holds Slurm's own plugins
# (Debian: /usr/lib/<multiarch>/slurm-wlm; RHEL/SUSE: /usr/lib64/slurm), else LIBDIR/slurm.
# A relative value is relative to the install prefix.
# plugstack.conf.d: NUMABIND_PLUGSTACK_DIR (cache). Default (decided at install time): /etc/slurm/
# plugstack.conf.d when the prefix is /usr, else PREFIX/etc/slurm/plugstack.conf.d.
# Both can also be overridden at install time through the environment variables of the same
# names, e.g. for a staging install that must not touch the system:
#   NUMABIND_SLURM_PLUGIN_DIR=$STAGE/slurm NUMABIND_PLUGSTACK_DIR=$STAGE/etc/plugstack.conf.d \
#     cmake --install build --prefix $STAGE
# The installed numabind.conf names the plugin by the full path it was installed to.
#
# Packaging: `cpack -G DEB` (in the build directory) builds numabind_<version>_<arch>.deb with
# exactly the components above (the plugin at the Slurm plugin directory, numabind.conf as a
# conffile in /etc/slurm/plugstack.conf.d). Only the components runtime, plugin, devel, man and
# doc are packaged: an install() rule elsewhere without one of these COMPONENTs is left out of
# the .deb (so spank/CMakeLists.txt's own install() of the plugin is not packaged twice).
# Configure with -DCMAKE_INSTALL_PREFIX=/usr for
# Debian's multiarch library directory. RPM: packaging/rpm/numabind.spec.

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(NUMABIND_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/numabind)
set(NUMABIND_PKGCONFIG_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# ---------------------------------------------------------------- Slurm plugin directory
set(_nb_plugin_dir_default "")
set(_nb_plugin_dir_how "")
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_get_variable(_nb_slurm_pc_libdir slurm libdir)
  if(_nb_slurm_pc_libdir)
    set(_nb_plugin_dir_default "${_nb_slurm_pc_libdir}/slurm")
    set(_nb_plugin_dir_how "pkg-config slurm")
  endif()
endif()
if(NOT _nb_plugin_dir_default)
  # The directory holding Slurm's own plugins (every Slurm install has auth_munge or select_*).
  set(_nb_candidates)
  if(CMAKE_LIBRARY_ARCHITECTURE)
    list(APPEND _nb_candidates /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/slurm-wlm
                               /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/slurm)
  endif()
  list(APPEND _nb_candidates /usr/lib64/slurm /usr/lib/slurm /usr/local/lib64/slurm
                             /usr/local/lib/slurm /opt/slurm/lib64/slurm /opt/slurm/lib/slurm)
  foreach(_d IN LISTS _nb_candidates)
    foreach(_probe select_cons_tres.so auth_munge.so proctrack_linuxproc.so task_affinity.so)
      if(EXISTS "${_d}/${_probe}")
        set(_nb_plugin_dir_default "${_d}")
        set(_nb_plugin_dir_how "found ${_d}/${_probe}")
        break()
      endif()
    endforeach()
    if(_nb_plugin_dir_default)
      break()
    endif()
  endforeach()
endif()
if(NOT _nb_plugin_dir_default)
  set(_nb_plugin_dir_default "${CMAKE_INSTALL_LIBDIR}/slurm")
  set(_nb_plugin_dir_how "no Slurm plugin directory found; relative to the prefix")
endif()
set(NUMABIND_SLURM_PLUGIN_DIR "${_nb_plugin_dir_default}" CACHE PATH
    "Where spank_numabind.so is installed (Slurm's plugin directory; relative = below the prefix)")
set(NUMABIND_PLUGSTACK_DIR "" CACHE PATH
    "Where numabind.conf is installed (empty: /etc/slurm/plugstack.conf.d for prefix /usr, else PREFIX/etc/slurm/plugstack.conf.d)")
if(TARGET spank_numabind)
  message(STATUS "numabind: SPANK plugin installs to ${NUMABIND_SLURM_PLUGIN_DIR} (${_nb_plugin_dir_how})")
endif()

# Slurm version the plugin is built against (for the package dependency).
set(NUMABIND_SLURM_VERSION "")
find_path(_nb_slurm_version_h_dir slurm/slurm_version.h HINTS ${SLURM_SPANK_INCLUDE_DIR})
if(_nb_slurm_version_h_dir)
  # SLURM_VERSION_NUMBER 0xMMmmuu (e.g. 0x160508 = 22.05.8)
  file(STRINGS "${_nb_slurm_version_h_dir}/slurm/slurm_version.h" _nb_v
       REGEX "^#define[ \t]+SLURM_VERSION_NUMBER[ \t]+0x[0-9a-fA-F]+")
  if(_nb_v MATCHES "(0x[0-9a-fA-F]+)")
    set(_nb_vn "${CMAKE_MATCH_1}")
    math(EXPR NUMABIND_SLURM_MAJOR "(${_nb_vn} >> 16) & 255")
    math(EXPR NUMABIND_SLURM_MINOR "(${_nb_vn} >> 8) & 255")
    math(EXPR _nb_micro "${_nb_vn} & 255")
    if(NUMABIND_SLURM_MINOR LESS 10)
      set(NUMABIND_SLURM_MINOR "0${NUMABIND_SLURM_MINOR}")
    endif()
    set(NUMABIND_SLURM_VERSION "${NUMABIND_SLURM_MAJOR}.${NUMABIND_SLURM_MINOR}.${_nb_micro}")
  endif()
endif()

if(TARGET spank_numabind)
  message(STATUS "numabind: plugin built for Slurm ${NUMABIND_SLURM_VERSION}")
endif()

# ---------------------------------------------------------------- the command
install(TARGETS numabind-cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)

# ---------------------------------------------------------------- plugin + plugstack entry
# Installed by code run at install time, so that the destination can be overridden through the
# environment and the plugstack entry names the plugin's real installed path.
if(TARGET spank_numabind)
  set(_nb_conf_src "${PROJECT_SOURCE_DIR}/etc/plugstack.conf.d/numabind.conf")
  string(CONFIGURE [=[
    # ---- numabind: SPANK plugin and its plugstack.conf.d entry
    set(_nb_plugin_dir "@NUMABIND_SLURM_PLUGIN_DIR@")
    if(NOT "$ENV{NUMABIND_SLURM_PLUGIN_DIR}" STREQUAL "")
      set(_nb_plugin_dir "$ENV{NUMABIND_SLURM_PLUGIN_DIR}")
    endif()
    if(NOT IS_ABSOLUTE "${_nb_plugin_dir}")
      set(_nb_plugin_dir "${CMAKE_INSTALL_PREFIX}/${_nb_plugin_dir}")
    endif()
    set(_nb_conf_dir "@NUMABIND_PLUGSTACK_DIR@")
    if(NOT "$ENV{NUMABIND_PLUGSTACK_DIR}" STREQUAL "")
      set(_nb_conf_dir "$ENV{NUMABIND_PLUGSTACK_DIR}")
    endif()
    if(_nb_conf_dir STREQUAL "")
      if(CMAKE_INSTALL_PREFIX STREQUAL "/usr" OR CMAKE_INSTALL_PREFIX STREQUAL "/usr/")
        set(_nb_conf_dir "/etc/slurm/plugstack.conf.d")
      else()
        set(_nb_conf_dir "${CMAKE_INSTALL_PREFIX}/etc/slurm/plugstack.conf.d")
      endif()
    elseif(NOT IS_ABSOLUTE "${_nb_conf_dir}")
      set(_nb_conf_dir "${CMAKE_INSTALL_PREFIX}/${_nb_conf_dir}")
    endif()
    file(INSTALL DESTINATION "${_nb_plugin_dir}" TYPE MODULE
         PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE
         FILES "$<TARGET_FILE:spank_numabind>" "$<TARGET_FILE:numabind_stepd>")
    if(CMAKE_INSTALL_DO_STRIP AND NOT "@CMAKE_STRIP@" STREQUAL "")
      foreach(_nb_so spank_numabind.so numabind_stepd.so)
        execute_process(COMMAND "@CMAKE_STRIP@" --strip-unneeded "$ENV{DESTDIR}${_nb_plugin_dir}/${_nb_so}")
      endforeach()
    endif()
    set(_nb_conf_src "@_nb_conf_src@")
    if(EXISTS "${_nb_conf_src}")
      file(READ "${_nb_conf_src}" _nb_conf)
      # Point every plugin line at the path the plugin was installed to.
      string(REGEX REPLACE "(^|\n)(#? *(required|optional)[ \t]+)[^ \t\n]*spank_numabind\\.so"
             "\\1\\2${_nb_plugin_dir}/spank_numabind.so" _nb_conf "${_nb_conf}")
      file(WRITE "@CMAKE_CURRENT_BINARY_DIR@/numabind-install/numabind.conf" "${_nb_conf}")
      file(INSTALL DESTINATION "${_nb_conf_dir}" TYPE FILE
           PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
           FILES "@CMAKE_CURRENT_BINARY_DIR@/numabind-install/numabind.conf")
    endif()
  ]=] _nb_plugin_install_code @ONLY)
  install(CODE "${_nb_plugin_install_code}" COMPONENT plugin)
endif()
if(NOT TARGET spank_numabind)
  # No plugin in this build: ship its plugstack entry as documentation only.
  install(FILES etc/plugstack.conf.d/numabind.conf DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples
          COMPONENT doc OPTIONAL)
endif()

# ---------------------------------------------------------------- library, headers, package config
# libnumabind is four static libraries (src/CMakeLists.txt); numabind::numabind brings the rest.
install(TARGETS numabind numabind_core numabind_sys numabind_hwloc EXPORT numabindTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT devel
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT devel
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# include/numabind holds the public API only (docs/API.md): the C header and the C++ planning API.
install(DIRECTORY include/numabind DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT devel
        FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h")
install(EXPORT numabindTargets NAMESPACE numabind:: DESTINATION ${NUMABIND_CMAKE_INSTALL_DIR}
        COMPONENT devel)
configure_package_config_file(cmake/numabindConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/numabind-install/numabindConfig.cmake
  INSTALL_DESTINATION ${NUMABIND_CMAKE_INSTALL_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/numabind-install/numabindConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/numabind-install/numabindConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/numabind-install/numabindConfigVersion.cmake
        DESTINATION ${NUMABIND_CMAKE_INSTALL_DIR} COMPONENT devel)

# pkg-config: relocatable (prefix derived from the .pc file's own directory).
if(IS_ABSOLUTE "${NUMABIND_PKGCONFIG_INSTALL_DIR}")
  set(NUMABIND_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _nb_pc_up "/nb-prefix/${NUMABIND_PKGCONFIG_INSTALL_DIR}" "/nb-prefix")
  string(REGEX REPLACE "/$" "" _nb_pc_up "${_nb_pc_up}")
  set(NUMABIND_PC_PREFIX "\${pcfiledir}/${_nb_pc_up}")
endif()
foreach(_v INCLUDEDIR LIBDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_v}}")
    set(NUMABIND_PC_${_v} "${CMAKE_INSTALL_${_v}}")
  else()
    set(NUMABIND_PC_${_v} "\${prefix}/${CMAKE_INSTALL_${_v}}")
  endif()
endforeach()
set(NUMABIND_PC_LIBS_EXTRA "-lnuma")
foreach(_l IN LISTS CMAKE_DL_LIBS)
  string(APPEND NUMABIND_PC_LIBS_EXTRA " -l${_l}")
endforeach()
configure_file(cmake/numabind.pc.in ${CMAKE_CURRENT_BINARY_DIR}/numabind-install/numabind.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/numabind-install/numabind.pc
        DESTINATION ${NUMABIND_PKGCONFIG_INSTALL_DIR} COMPONENT devel)

# ---------------------------------------------------------------- man pages, docs, examples
install(FILES man/numabind.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT man OPTIONAL)
install(FILES man/spank_numabind.8 DESTINATION ${CMAKE_INSTALL_MANDIR}/man8 COMPONENT man OPTIONAL)
# Directories (not globs) so that files added later need no re-configure.
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT doc
        FILES_MATCHING PATTERN "*.md")
# License: Apache-2.0 (LICENSE); Debian's machine-readable copyright file names it and points
# at the full text every Debian system has. The RPM ships LICENSE itself (%license).
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/numabind-install/copyright
"Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: numabind

Files: *
Copyright: numabind maintainers
License: Apache-2.0

License: Apache-2.0
 Licensed under the Apache License, Version 2.0 (the \"License\"); you may not
 use this software except in compliance with the License. You may obtain a copy
 of the License at http://www.apache.org/licenses/LICENSE-2.0
 .
 Unless required by applicable law or agreed to in writing, software distributed
 under the License is distributed on an \"AS IS\" BASIS, WITHOUT WARRANTIES OR
 CONDITIONS OF ANY KIND, either express or implied. See the License for the
 specific language governing permissions and limitations under the License.
 .
 On Debian systems, the complete text of the Apache License, Version 2.0 can be
 found in /usr/share/common-licenses/Apache-2.0.
")
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/numabind-install/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR}
        COMPONENT doc)
install(DIRECTORY examples/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT doc
        USE_SOURCE_PERMISSIONS
        PATTERN "__pycache__" EXCLUDE PATTERN "*.pyc" EXCLUDE)

# ---------------------------------------------------------------- CPack: one .deb
set(CPACK_PACKAGE_NAME numabind)
set(CPACK_PACKAGE_VENDOR "numabind")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Bind GPU tasks to the CPUs and memory local to their accelerator (Slurm SPANK plugin and CLI)")
set(CPACK_PACKAGE_DESCRIPTION
"numabind binds every task of a GPU job to the CPUs and memory of the NUMA node of its
accelerator, with modes node, socket, exclusive and core-complex. It ships the Slurm
SPANK plugin spank_numabind.so (srun/sbatch --numa-binding=MODE), its plugstack.conf.d
entry, the numabind command (run, show, plan, topo) and the libnumabind C++ library.")
set(CPACK_PACKAGE_CONTACT "numabind maintainers <numabind@localhost>")
set(CPACK_GENERATOR DEB)
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Only numabind's own components (the plugin through this file, not any other install rule).
set(CPACK_INSTALL_CMAKE_PROJECTS)
foreach(_c runtime plugin devel man doc)
  list(APPEND CPACK_INSTALL_CMAKE_PROJECTS "${CMAKE_BINARY_DIR}" "${PROJECT_NAME}" "${_c}" "/")
endforeach()

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${CPACK_PACKAGE_CONTACT}")
find_program(_nb_dpkg_shlibdeps dpkg-shlibdeps)
find_program(_nb_file file)  # CPackDeb needs it to find the ELF files for shlibdeps
if(_nb_dpkg_shlibdeps AND _nb_file)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # adds libc6, libstdc++6, libhwloc15, libnuma1 (+versions)
endif()
set(_nb_deb_depends "libhwloc15, libnuma1")
if(TARGET spank_numabind AND NUMABIND_SLURM_VERSION)
  # Slurm loads a plugin only if it was built for the same major.minor release.
  math(EXPR _nb_next_minor "${NUMABIND_SLURM_MINOR} + 1")
  if(_nb_next_minor LESS 10)
    set(_nb_next_minor "0${_nb_next_minor}")
  endif()
  string(APPEND _nb_deb_depends
    ", slurm-wlm-basic-plugins (>= ${NUMABIND_SLURM_MAJOR}.${NUMABIND_SLURM_MINOR}~)"
    ", slurm-wlm-basic-plugins (<< ${NUMABIND_SLURM_MAJOR}.${_nb_next_minor}~)")
  # Which Slurm release this build's plugin is for, by name (one .deb per release).
  set(CPACK_DEBIAN_PACKAGE_PROVIDES "numabind-slurm-${NUMABIND_SLURM_MAJOR}.${NUMABIND_SLURM_MINOR}")
endif()
set(NUMABIND_DEB_DEPENDS_OVERRIDE "" CACHE STRING
    "Depends: of the .deb instead of the computed one (besides shlibdeps); empty = computed")
if(NUMABIND_DEB_DEPENDS_OVERRIDE)
  set(_nb_deb_depends "${NUMABIND_DEB_DEPENDS_OVERRIDE}")
endif()
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${_nb_deb_depends}")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "hwloc")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3, slurmd")
# The plugstack entry is a conffile (kept across upgrades when the admin edits it).
set(_nb_conffile_dir "${NUMABIND_PLUGSTACK_DIR}")
if(NOT _nb_conffile_dir)
  set(_nb_conffile_dir /etc/slurm/plugstack.conf.d)
endif()
if(TARGET spank_numabind AND EXISTS "${PROJECT_SOURCE_DIR}/etc/plugstack.conf.d/numabind.conf"
   AND IS_ABSOLUTE "${_nb_conffile_dir}")
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/numabind-install/debian/conffiles "${_nb_conffile_dir}/numabind.conf\n")
  set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CMAKE_CURRENT_BINARY_DIR}/numabind-install/debian/conffiles)
endif()
include(CPack)
