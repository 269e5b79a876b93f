// The node-local wait that follows numabind's PMIx query: every local rank of the namespace
// has closed its query connection before any of them starts the program.
//
// Why: PMIx servers up to 5.0.x treat a client that finalized as gone from the collectives
// already under way (openpmix#3931, fixed upstream in 2026). If one rank's program is inside
// MPI_Init's fence while another rank's query connection closes, that fence completes short
// and the late rank's MPI_Init waits forever. Once all queries are closed, no fence can be
// open yet: every rank's program starts after the wait.
#pragma once

#include <string>

namespace numabind {

struct BarrierOutcome {
    bool complete = false;   // all `expected` arrived before the deadline
    int arrived = 0;         // how many had arrived when it ended
    long long waited_ms = 0;
    std::string error;       // non-empty: no wait was possible (the directory), `complete` is false
};

// Where the wait's files live: /dev/shm when it is a directory (node-local, per job under
// Slurm's job_container/tmpfs), else $TMPDIR, else /tmp.
std::string barrier_base_directory();

// Marks this process as arrived in <base>/numabind-pmix-<uid>-<hash of key> (key: the namespace
// and the PMIx server's address, which tell one node's ranks apart) and waits until
// `expected` processes have, or `timeout_ms` passed. The directory must be ours (owner, no
// group/other write, not a symlink). The last process through removes the files.
BarrierOutcome wait_for_local_queries(const std::string& base, const std::string& key, int expected,
                                      long long timeout_ms);

}  // namespace numabind
