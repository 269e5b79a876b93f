"""Prints the directory under PREFIX where the running interpreter imports modules from
(cmake/InstallApi.cmake: where `cmake --install` puts the numabind module), or, when it
searches none under PREFIX, "unsearched:" and the conventional site-packages directory."""
import os
import sys
import sysconfig

prefix = os.path.abspath(sys.argv[1])
ver = f"python{sys.version_info[0]}.{sys.version_info[1]}"
searched = {os.path.abspath(p) for p in sys.path if p}
candidates = [os.path.join(prefix, "lib", "python3", "dist-packages"),  # Debian's packages
              os.path.join(prefix, "lib", ver, "dist-packages"),        # Debian, /usr/local
              os.path.join(prefix, "lib", ver, "site-packages"),        # upstream, Fedora/RHEL
              os.path.join(prefix, "lib64", ver, "site-packages")]
for c in candidates:
    if c in searched:
        print(c)
        sys.exit(0)
print("unsearched:" + sysconfig.get_path("purelib", "posix_prefix", vars={"base": prefix, "platbase": prefix}))
