# fuzz/hwloc_crash_filter.sh — sourced by fuzz/run.sh and fuzz/smoke.sh.
# The filter reads function names from the sanitizer's stack: without llvm-symbolizer
# (Debian's `llvm` package) frames have no names and every hwloc crash counts as numabind's,
# so fuzz/smoke.sh checks first that a known hwloc crash is recognised.
# True when a crash (SEGV, or an assert/abort) happened inside libhwloc while
# HwlocTopology's constructor was loading the XML, with no numabind code between: the first
# stack frame that is not hwloc (libhwloc, its XML plugin, libxml2 under it), libc or the
# fuzzer/sanitizer runtime is that constructor.
hwloc_internal_crash() {
  grep -Eq 'ERROR: AddressSanitizer: SEGV|ERROR: libFuzzer: deadly signal' "$1" || return 1
  grep -q 'libhwloc\.so' "$1" || return 1
  awk '/^    #[0-9]+ /{
         if ($0 ~ /libhwloc\.so|\/hwloc\/hwloc_[a-z_]+\.so|libxml2\.so|libc\.so|[ \/](nptl|stdlib|assert|signal)\/|__sanitizer|fuzzer::/) next
         print; exit }' "$1" | grep -q 'numabind::HwlocTopology::HwlocTopology'
}
