#!/usr/bin/env python3
"""Every argument the plugin's parsers accept is a token of fuzz_options' dictionary.

    fuzz_dict_test.py SOURCE_DIR

The keys come from the parsers' own sources: the plugstack keys of kSiteKeys (the one-line help
text in spank/policy/config.cpp) and the rows of the --numa-binding flag table
(spank/policy/option_flags.cpp), so a key added to a parser without its token fails here.
Exit 1 naming each missing token.
"""
import pathlib
import re
import sys


def main() -> int:
    root = pathlib.Path(sys.argv[1])
    source = (root / 'spank/policy/config.cpp').read_text()
    tokens = set(re.findall(r'^"(.*)"$', (root / 'fuzz/dict/fuzz_options.dict').read_text(), re.M))
    site = re.search(r'kSiteKeys =\s*((?:"[^"]*"\s*)+);', source)
    # a row of the flag table: {"name", BARE, {values}, ...}
    flags = re.findall(r'\{"([a-z_]+)", (true|false), \{', (root / 'spank/policy/option_flags.cpp').read_text())
    if not site or not flags:
        print('cannot find kSiteKeys in spank/policy/config.cpp or the flag table in option_flags.cpp (update this test)')
        return 1
    site_text = ''.join(re.findall(r'"([^"]*)"', site.group(1)))
    wanted = set()
    for item in site_text.split(', '):  # "default=<mode>", "verbose[=yes|no|2]", "respect_user_bind=yes|no (alias ...)"
        key = re.match(r'[a-z_]+', item).group(0)
        wanted.add(key + '=' if '=' in item.split(' ')[0] and not item.startswith(key + '[') else key)
    for alias in re.findall(r'alias ([a-z_]+)', site_text):
        wanted.add(alias + '=')
    for name, bare in flags:  # a bare flag ("ucx") may also take a value ("ucx=no")
        wanted.add(name if bare == 'true' else name + '=')
        if bare == 'true':
            wanted.add(name + '=')
    missing = sorted(w for w in wanted if not any(t == w or t.startswith(w) for t in tokens))
    for w in missing:
        print(f'fuzz/dict/fuzz_options.dict has no token for {w!r}')
    print(f'fuzz_dict: {len(wanted)} parser keys, {len(missing)} missing')
    return 1 if missing else 0


if __name__ == '__main__':
    sys.exit(main())
