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
$NUMABIND_TOPOLOGY_CORPUS wins over CORPUS_DIR; without a corpus: one line, exit 77 (skipped).
First a self-test: a copy, a re-indented copy, an excerpt and a reordered copy of a corpus
file must each be caught, and a generated topology must not be.
Python 3 standard library only.
"""

import hashlib
import os
import re
import subprocess
import shutil
import sys
import tempfile

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


def load_corpus(corpus):
    exact, squeezed, pairs, line_sets = {}, {}, {}, {}
    for d, _, files in os.walk(corpus):
        for f in files:
            path = os.path.join(d, f)
            name = os.path.relpath(path, corpus)
            with open(path, "rb") as fh:
                data = fh.read()
            exact[hashlib.sha256(data).hexdigest()] = name
            squeezed[hashlib.sha256(re.sub(rb"\s+", b"", data)).hexdigest()] = name
            sig = [l for l in lines_of(data) if significant(l)]
            line_sets[name] = set(sig)
            for a, b in zip(sig, sig[1:]):
                pairs.setdefault((a, b), name)
    return exact, squeezed, pairs, line_sets


def copies(root, files, corpus, index):
    """One line per file of `files` (relative to root) that copies a corpus file."""
    exact, squeezed, pairs, line_sets = index
    problems = []
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
    return problems


def self_test(corpus, index):
    """The check must catch each kind of copy (and not a file the project generates)."""
    xmls = sorted(f for f in os.listdir(corpus) if f.endswith(".xml"))
    src = os.path.join(corpus, xmls[0])
    with open(src, "rb") as fh:
        data = fh.read()
    lines = data.decode("utf-8", "replace").splitlines()
    with tempfile.TemporaryDirectory() as tmp:
        cases = {
            "copy.xml": data,
            "reindented.xml": "\n".join("\t" + l.strip() for l in lines).encode(),
            "excerpt.txt": ("// pasted\n" + "\n".join(lines[len(lines) // 3:len(lines) // 3 + 60])).encode(),
            "shuffled.xml": "\n".join(sorted(set(lines))).encode(),
        }
        for name, body in cases.items():
            with open(os.path.join(tmp, name), "wb") as fh:
                fh.write(body)
        gen = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen_topology.py")
        own = []
        if shutil.which("lstopo-no-graphics"):
            subprocess.run([sys.executable, gen, "--preset", "dgx-a100", "-o", os.path.join(tmp, "generated.xml")],
                           check=True)
            own = ["generated.xml"]
        found = copies(tmp, list(cases), corpus, index)
        missed = [n for n in cases if not any(p.startswith(n + ":") for p in found)]
        wrong = copies(tmp, own, corpus, index)
    for n in missed:
        print("FAIL - self-test: a %s of %s was not recognised" % (n.split(".")[0], xmls[0]))
    for p in wrong:
        print("FAIL - self-test: a generated file was taken for a copy: " + p)
    return not missed and not wrong


def main():
    if len(sys.argv) not in (2, 3):
        sys.stderr.write(__doc__)
        return 2
    root = sys.argv[1]
    corpus = os.environ.get("NUMABIND_TOPOLOGY_CORPUS") or (sys.argv[2] if len(sys.argv) == 3 else "")
    if not corpus or not os.path.isfile(os.path.join(corpus, "expected_gpu_locality.json")):
        print("skip: recorded topology corpus not found at %r: set NUMABIND_TOPOLOGY_CORPUS to the directory "
              "of its INDEX.md and expected_gpu_locality.json" % corpus)
        return 77
    corpus = os.path.realpath(corpus)
    index = load_corpus(corpus)
    ok = self_test(corpus, index)
    files = tree_files(root)
    problems = copies(root, files, corpus, index)
    for p in problems:
        print("FAIL - " + p)
    print("%d file(s) of %s checked against %d corpus file(s) in %s: %d copy(ies)"
          % (len(files), os.path.realpath(root), len(index[0]), corpus, len(problems)))
    return 0 if ok and not problems else 1


if __name__ == "__main__":
    sys.exit(main())
