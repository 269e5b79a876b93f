#!/usr/bin/env python3
"""The layering rules of the tree, checked on every #include (docs/DEVELOPING.md, Layout).

    check_layers.py SOURCE_DIR

Each folder may include only what its library links: the core stays pure (standard library,
nlohmann-json, the public API and itself; no system header that does I/O), the public headers
include only public headers, the plugin's front reaches neither hwloc, libnuma nor the
engine, the pure plugin policy includes no Slurm header. Exit 1 naming every offending line.
"""
import pathlib
import re
import sys

# folder -> (allowed quoted-include prefixes, forbidden <system> headers (regex))
IO_HEADERS = r'(unistd|fcntl|dirent|dlfcn|numa|numaif|sched|hwloc|slurm/.*|sys/.*|fstream|filesystem|cstdio|stdio)\.?h?$'
RULES = {
    'include/numabind': (('numabind/',), r'(unistd|fcntl|dlfcn|numa|numaif|hwloc|slurm/.*|sys/.*)\.?h?$'),
    'src/core': (('numabind/', 'core/'), r'(unistd|fcntl|dirent|dlfcn|numa|numaif|sched|hwloc|slurm/.*|sys/.*|fstream|filesystem)\.?h?$'),
    'src/sys': (('numabind/', 'core/', 'sys/'), r'(hwloc|slurm/.*)\.?h?$'),
    'src/hwloc': (('numabind/', 'core/', 'sys/', 'hwloc/'), r'slurm/.*$'),
    'src/api': (('numabind/', 'core/', 'sys/', 'hwloc/', 'api/'), r'slurm/.*$'),
    'pmix': (('numabind/', 'core/', 'pmix_rank', 'query_barrier'), r'(hwloc|slurm/.*)\.?h?$'),
    'spank/policy': (('numabind/', 'core/', 'policy/', 'config', 'log_text', 'option_flags', 'slurm_conf',
                      'step_policy'), r'(hwloc|numa|numaif|slurm/.*)\.?h?$'),
    'spank/shared': (('numabind/', 'core/', 'policy/', 'shared/', 'messages', 'step_scope', 'stepd_api', 'said_once',
                      'fall_back'), r'(hwloc|numa|numaif)\.?h?$'),
    'spank/front': (('numabind/error', 'policy/', 'shared/', 'front', 'engine_loader'), r'(hwloc|numa|numaif)\.?h?$'),
    'spank/engine': (('numabind/', 'core/', 'sys/', 'hwloc/', 'api/', 'policy/', 'shared/', 'context', 'devices',
                      'node_share', 'slurm_facts', 'task_plan', 'step_plan', 'gpus_held', 'code_pages'), r'hwloc\.h$'),
}


def main() -> int:
    root = pathlib.Path(sys.argv[1])
    bad = []
    checked = 0
    for folder, (allowed, forbidden) in RULES.items():
        files = [p for p in (root / folder).glob('*') if p.suffix in ('.c', '.cpp', '.h', '.hpp')]
        if not files:
            bad.append(f'{folder}: no sources (the layout changed: update tests/tools/check_layers.py)')
        for path in files:
            checked += 1
            for n, line in enumerate(path.read_text().splitlines(), 1):
                m = re.match(r'\s*#\s*include\s*([<"])([^>"]+)[>"]', line)
                if not m:
                    continue
                kind, name = m.groups()
                close = '>' if kind == '<' else '"'
                where = f'{path.relative_to(root)}:{n}: #include {kind}{name}{close}'
                if kind == '"' and not name.startswith(allowed):
                    bad.append(f'{where}: {folder} may include only {", ".join(allowed)}')
                if kind == '<' and re.match(forbidden, name):
                    bad.append(f'{where}: {folder} must not include <{name}>')
    for line in bad:
        print(line)
    print(f'check_layers: {checked} files, {len(bad)} violations')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
