#!/usr/bin/env python3
"""check_no_corpus_copies.py SOURCE_TREE [CORPUS_DIR] — fail if the tree carries a copy of a
recorded-corpus file (other projects' hwloc XML, INDEX.md, expected_gpu_locality.json).

A copy is any of:
  - the same bytes (SHA-256), or the same text once all whitespace is removed;
  - a run of RUN (default 8) consecutive non-trivial lines that also follow one another in
    a corpus file (a verbatim excerpt, e.g. a trimmed XML);
  - a file of which more than HALF of the distinct non-trivial lines occur in one corpus
    file (a copy re-indented or reordered).
Non-trivial: at least 24 characters once stripped, and not a line every hwloc export has.
The tree's files are `git ls-files --cached --others --exclude-standard` (what a commit
would carry), or every file outside .git and build* directories without git.
CORPUS_DIR defaults to $NUMABIND_TOPOLOGY_CORPUS; without one: one line, exit 77 (skipped).
Python 3 standard library only.
"""

import hashlib
import os
import re
import subprocess
import sys

RUN = 8
HALF = 0.5
MIN_LEN = 24
# Lines too generic to prove anything (every hwloc XML has them).
GENERIC = re.compile(r'^(<\?xml |<!DOCTYPE |<topology |</topology>|</object>|<page_type |<info name="(Backend|hwlocVersion|ProcessName|OSName)")')


def lines_of(data):
    text = data.decode("utf-8", "replace")
    return [l.strip() for l in text.splitlines()]


def significant(line):
    return len(line) >= MIN_LEN and not GENERIC.match(line)


def tree_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True).stdout
        names = [n for n in out.decode().split("\0") if n]
    except (OSError, subprocess.CalledProcessError):
        names = []
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if x != ".git" and not x.startswith("build")]
            names += [os.path.relpath(os.path.join(d, f), root) for f in files]
    return [n for n in names if os.path.isfile(os.path.join(root, n))]


def main():
    if len(sys.argv) not in (2, 3):
        sys.stderr.write(__doc__)
        return 2
    root = sys.argv[1]
    corpus = sys.argv[2] if len(sys.argv) == 3 else os.environ.get("NUMABIND_TOPOLOGY_CORPUS", "")
    corpus = os.environ.get("NUMABIND_TOPOLOGY_CORPUS") or corpus
    if not corpus or not os.path.isfile(os.path.join(corpus, "expected_gpu_locality.json")):
        print("skip: recorded topology corpus not found at %r: set NUMABIND_TOPOLOGY_CORPUS to the directory "
              "of its INDEX.md and expected_gpu_locality.json" % corpus)
        return 77
    corpus = os.path.realpath(corpus)
    root_real = os.path.realpath(root)

    exact, squeezed, pairs, line_sets = {}, {}, {}, {}
    ncorpus = 0
    for d, _, files in os.walk(corpus):
        for f in files:
            path = os.path.join(d, f)
            name = os.path.relpath(path, corpus)
            with open(path, "rb") as fh:
                data = fh.read()
            ncorpus += 1
            exact[hashlib.sha256(data).hexdigest()] = name
            squeezed[hashlib.sha256(re.sub(rb"\s+", b"", data)).hexdigest()] = name
            sig = [l for l in lines_of(data) if significant(l)]
            line_sets[name] = set(sig)
            for a, b in zip(sig, sig[1:]):
                pairs.setdefault((a, b), name)

    problems = []
    files = tree_files(root)
    for rel in files:
        path = os.path.join(root, rel)
        if os.path.realpath(path).startswith(corpus + os.sep):
            continue  # the corpus itself, should it sit inside the tree being checked
        with open(path, "rb") as fh:
            data = fh.read()
        h = hashlib.sha256(data).hexdigest()
        if h in exact:
            problems.append("%s: byte-for-byte copy of corpus file %s" % (rel, exact[h]))
            continue
        s = hashlib.sha256(re.sub(rb"\s+", b"", data)).hexdigest()
        if s in squeezed and data.strip():
            problems.append("%s: copy of corpus file %s (whitespace changed)" % (rel, squeezed[s]))
            continue
        sig = [l for l in lines_of(data) if significant(l)]
        run, best, where = 1, 1, None
        for a, b in zip(sig, sig[1:]):
            if (a, b) in pairs:
                run += 1
                if run > best:
                    best, where = run, pairs[(a, b)]
            else:
                run = 1
        if best >= RUN:
            problems.append("%s: %d consecutive lines as in corpus file %s" % (rel, best, where))
            continue
        distinct = set(sig)
        if len(distinct) >= 2 * RUN:
            for name, lines in line_sets.items():
                shared = len(distinct & lines)
                if shared > HALF * len(distinct):
                    problems.append("%s: %d of its %d distinct lines are lines of corpus file %s"
                                    % (rel, shared, len(distinct), name))
                    break

    for p in problems:
        print("FAIL - " + p)
    print("%d file(s) of %s checked against %d corpus file(s) in %s: %d copy(ies)"
          % (len(files), root_real, ncorpus, corpus, len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
