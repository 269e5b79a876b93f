#!/usr/bin/env python3
"""Every argument the plugin's parsers accept is a token of fuzz_options' dictionary.

    fuzz_dict_test.py SOURCE_DIR

The keys come from the parser's own one-line help texts in spank/policy/config.cpp (the
plugstack keys of kSiteKeys, the --numa-binding flags of option_help), so a key added to the
parser without its token fails here. Exit 1 naming each missing token.
"""
import pathlib
import re
import sys


def main() -> int:
    root = pathlib.Path(sys.argv[1])
    source = (root / 'spank/policy/config.cpp').read_text()
    tokens = set(re.findall(r'^"(.*)"$', (root / 'fuzz/dict/fuzz_options.dict').read_text(), re.M))
    site = re.search(r'kSiteKeys =\s*((?:"[^"]*"\s*)+);', source)
    flags = re.search(r'return std::string\("([^"]*)"\)', source)
    if not site or not flags:
        print('cannot find kSiteKeys or option_help in spank/policy/config.cpp (update this test)')
        return 1
    site_text = ''.join(re.findall(r'"([^"]*)"', site.group(1)))
    wanted = set()
    for item in site_text.split(', '):  # "default=<mode>", "verbose[=yes|no|2]", "respect_user_bind=yes|no (alias ...)"
        key = re.match(r'[a-z_]+', item).group(0)
        wanted.add(key + '=' if '=' in item.split(' ')[0] and not item.startswith(key + '[') else key)
    for alias in re.findall(r'alias ([a-z_]+)', site_text):
        wanted.add(alias + '=')
    for flag in re.findall(r'\[,([a-z]+)', flags.group(1)):  # "[,ucx]", "[,smt=1|all]", "[,omp]"
        wanted.add(flag)
    for flag in re.findall(r'\[,([a-z]+=)', flags.group(1)):
        wanted.add(flag)
    missing = sorted(w for w in wanted if not any(t == w or t.startswith(w) for t in tokens))
    for w in missing:
        print(f'fuzz/dict/fuzz_options.dict has no token for {w!r}')
    print(f'fuzz_dict: {len(wanted)} parser keys, {len(missing)} missing')
    return 1 if missing else 0


if __name__ == '__main__':
    sys.exit(main())
