// PMIx adapter: this process's local rank and the node's local task count from the
// launcher's PMIx server (srun --mpi=pmix, Open MPI's mpirun/prterun, ...).
//
// With PMIx's shared-memory store (gds ds21 in 4.x) connecting as a PMIx client spends the
// process's PMIx identity: a PMIx/MPI program exec'd afterwards fails in MPI_Init ("getting
// local rank failed ... Not found"). With the hash store (PMIX_MCA_gds=hash) for this query
// AND the program, both work (measured on PMIx 4.2 and 5.0: docs/MPI.md), so that is set
// here unless the user chose a store. Only used when asked for (`--rank-source pmix`).
//
// Never hangs: without PMIX_NAMESPACE and a PMIX_SERVER_URI* variable it fails at once
// (no connection attempt — PMIx v4 would otherwise start a singleton). The PMIx calls
// run in a forked child that the parent kills after NUMABIND_PMIX_TIMEOUT seconds
// (default 10); PMIx_Get also carries PMIX_TIMEOUT.
//
// Then the node's ranks wait for each other's queries to end (query_barrier.hpp): a query
// connection that closes while another rank's program fences in MPI_Init hangs that
// program on PMIx servers up to 5.0.x. NUMABIND_PMIX_WAIT=0 skips the wait (an MPMD job
// whose other programs do not run numabind waits NUMABIND_PMIX_TIMEOUT for them otherwise).
#include <fcntl.h>
#include <poll.h>
#include <pmix.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "pmix_rank.hpp"
#include "query_barrier.hpp"

extern char** environ;

namespace numabind {

namespace {

constexpr int kDefaultTimeoutSeconds = 10;

// What the child sends back through the pipe: fixed size, no pointers.
struct Reply {
    int ok = 0;            // 1: rank (and maybe size) valid
    int rank = -1;
    int size = 0;          // 0: PMIX_LOCAL_SIZE not available
    int size_from_peers = 0;  // 1: size is the length of PMIX_LOCAL_PEERS
    char message[200] = {};  // error, or the namespace/rank on success
};

// The PMIX_SERVER_URI* variables ("NAME=value"), sorted: they name the rank's PMIx server.
std::vector<std::string> server_uri_variables() {
    std::vector<std::string> uris;
    for (char** e = environ; e && *e; ++e)
        if (std::strncmp(*e, "PMIX_SERVER_URI", 15) == 0) uris.emplace_back(*e);
    std::sort(uris.begin(), uris.end());
    return uris;
}

bool server_in_environment(std::string& why) {
    const bool have_uri = !server_uri_variables().empty();
    const bool have_ns = std::getenv("PMIX_NAMESPACE") != nullptr;
    if (have_uri && have_ns) return true;
    why = std::string("no PMIx server to ask: ") +
          (have_ns ? "no PMIX_SERVER_URI* variable" : have_uri ? "PMIX_NAMESPACE is not set" :
                                                               "PMIX_NAMESPACE and PMIX_SERVER_URI* are not set") +
          " (not started by a PMIx launcher such as `srun --mpi=pmix` or `mpirun`)";
    return false;
}

int timeout_seconds() {
    const char* v = std::getenv("NUMABIND_PMIX_TIMEOUT");
    if (!v || !*v) return kDefaultTimeoutSeconds;
    char* end = nullptr;
    long t = std::strtol(v, &end, 10);
    if (*end != '\0' || t < 1 || t > 3600) return kDefaultTimeoutSeconds;
    return static_cast<int>(t);
}

bool value_to_int(const pmix_value_t* v, long long& out) {
    switch (v->type) {
        case PMIX_UINT16: out = v->data.uint16; return true;
        case PMIX_UINT32: out = v->data.uint32; return true;
        case PMIX_UINT64: out = static_cast<long long>(v->data.uint64); return true;
        case PMIX_UINT8: out = v->data.uint8; return true;
        case PMIX_INT: out = v->data.integer; return true;
        case PMIX_INT16: out = v->data.int16; return true;
        case PMIX_INT32: out = v->data.int32; return true;
        case PMIX_INT64: out = v->data.int64; return true;
        case PMIX_UINT: out = v->data.uint; return true;
        case PMIX_SIZE: out = static_cast<long long>(v->data.size); return true;
        case PMIX_PROC_RANK: out = v->data.rank; return true;
        default: return false;
    }
}

void set_message(Reply& r, const std::string& m) {
    std::snprintf(r.message, sizeof r.message, "%s", m.c_str());
}

// PMIx_Get bounded by PMIX_TIMEOUT (seconds); the caller releases *val.
pmix_status_t get_with_timeout(const pmix_proc_t* proc, const char* key, int timeout, pmix_value_t** val) {
    pmix_info_t info;
    PMIX_INFO_CONSTRUCT(&info);
    PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &timeout, PMIX_INT);
    *val = nullptr;
    pmix_status_t rc = PMIx_Get(proc, key, &info, 1, val);
    PMIX_INFO_DESTRUCT(&info);
    return rc;
}

// One PMIx_Get of an integer; false with `err` set on failure.
bool get_int(const pmix_proc_t* proc, const char* key, int timeout, long long& out, std::string& err) {
    pmix_value_t* val = nullptr;
    pmix_status_t rc = get_with_timeout(proc, key, timeout, &val);
    if (rc != PMIX_SUCCESS || !val) {
        err = std::string("PMIx_Get(") + key + ") failed: " + PMIx_Error_string(rc);
        return false;
    }
    bool ok = value_to_int(val, out);
    if (!ok) err = std::string("PMIx_Get(") + key + ") returned a non-integer value (type " +
                   std::to_string(static_cast<int>(val->type)) + ")";
    PMIX_VALUE_RELEASE(val);
    return ok;
}

// The number of entries of PMIX_LOCAL_PEERS ("0,1,5"); 0 when unavailable.
long long count_local_peers(const pmix_proc_t* job, int timeout) {
    pmix_value_t* val = nullptr;
    pmix_status_t rc = get_with_timeout(job, PMIX_LOCAL_PEERS, timeout, &val);
    long long n = 0;
    if (rc == PMIX_SUCCESS && val && val->type == PMIX_STRING && val->data.string && *val->data.string) {
        n = 1;
        for (const char* c = val->data.string; *c; ++c) n += (*c == ',');
    }
    if (val) PMIX_VALUE_RELEASE(val);
    return n > 1000000 ? 0 : n;
}

// Runs in the forked child: the whole PMIx conversation.
Reply query_server(int timeout) {
    Reply r;
    alarm(static_cast<unsigned>(timeout) + 1);  // backstop; the parent kills us at `timeout` anyway
    pmix_proc_t me;
    PMIX_PROC_CONSTRUCT(&me);
    pmix_status_t rc = PMIx_Init(&me, nullptr, 0);
    if (rc != PMIX_SUCCESS) {
        set_message(r, std::string("PMIx_Init failed: ") + PMIx_Error_string(rc));
        return r;
    }
    std::string err;
    long long rank = -1, size = 0;
    // PMIX_LOCAL_RANK is per process: ask with our own proc (the wildcard gives NOT-FOUND).
    if (!get_int(&me, PMIX_LOCAL_RANK, timeout, rank, err) || rank < 0 || rank > 1000000) {
        set_message(r, err.empty() ? "PMIX_LOCAL_RANK out of range: " + std::to_string(rank) : err);
    } else {
        // PMIX_LOCAL_SIZE is job-level: ask with the wildcard rank of our namespace. Slurm
        // 24.11's PMIx 5 server answers that with NOT-FOUND; it does give the list of the
        // node's ranks (PMIX_LOCAL_PEERS, "0,1"), whose length is the same number.
        pmix_proc_t job;
        PMIX_PROC_CONSTRUCT(&job);
        PMIX_LOAD_PROCID(&job, me.nspace, PMIX_RANK_WILDCARD);
        if (!get_int(&job, PMIX_LOCAL_SIZE, timeout, size, err) || size < 1 || size > 1000000) {
            size = count_local_peers(&job, timeout);
            if (size > 0) r.size_from_peers = 1;
        }
        r.ok = 1;
        r.rank = static_cast<int>(rank);
        r.size = static_cast<int>(size);
        set_message(r, std::string(me.nspace) + " rank " + std::to_string(me.rank));
    }
    // Always finalize: a launcher (ORTE) treats a client that connected and vanished
    // without finalizing as an abnormal termination of the rank.
    PMIx_Finalize(nullptr, 0);
    return r;
}

bool write_all(int fd, const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= static_cast<size_t>(w);
    }
    return true;
}

long long now_ms() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<long long>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// The wait for the node's other queries; returns what --verbose says of it ("" when none).
std::string wait_for_the_node(int local_size, int timeout) {
    const char* wait = std::getenv("NUMABIND_PMIX_WAIT");
    if (wait && std::strcmp(wait, "0") == 0) return "no wait for the node's queries (NUMABIND_PMIX_WAIT=0), ";
    if (local_size < 2) return "";
    // The ranks to wait for: this namespace's ranks served by the same PMIx server (same
    // PMIX_SERVER_URI* values). The namespace alone is not enough where several of the job's
    // "nodes" share one host and its /dev/shm (Slurm's multiple-slurmd setups, containers).
    const char* ns = std::getenv("PMIX_NAMESPACE");  // present: server_in_environment checked it
    std::string key = ns ? ns : "";
    for (const std::string& u : server_uri_variables()) key += "\n" + u;
    BarrierOutcome b = wait_for_local_queries(barrier_base_directory(), key, local_size,
                                              static_cast<long long>(timeout) * 1000);
    if (b.complete)
        return "the node's " + std::to_string(local_size) + " queries done after " + std::to_string(b.waited_ms) +
               " ms, ";
    std::string why = !b.error.empty() ? b.error
                                       : std::to_string(b.arrived) + " of " + std::to_string(local_size) +
                                             " local ranks finished their PMIx query within " +
                                             std::to_string(timeout) + " s (NUMABIND_PMIX_TIMEOUT)";
    std::fprintf(stderr,
                 "numabind: warning: not waiting for the node's other PMIx queries: %s; an MPI program may hang "
                 "in MPI_Init on PMIx servers up to 5.0.x (docs/MPI.md)\n",
                 why.c_str());
    return "the node's queries not awaited, ";
}

}  // namespace

bool pmix_available() { return true; }

std::optional<LocalRank> pmix_local_rank(std::string& error) {
    std::string why;
    if (!server_in_environment(why)) {
        error = why;
        return std::nullopt;
    }
    // Before the fork: the child's PMIx_Init and the exec'd program must both use it.
    std::string gds;
    if (const char* user_gds = std::getenv("PMIX_MCA_gds")) {
        gds = std::string("PMIX_MCA_gds=") + user_gds + " from the environment";
    } else if (PMIX_VERSION_MAJOR >= 5) {
        // PMIx 5's shared-memory store (shmem2) is not spent by a client that comes and goes,
        // and under Slurm 24.11's server the hash store left an MPI program seeing itself alone
        // on its node (local size 1): keep the defaults there.
        gds = "PMIx 5 default stores";
    } else {
        gds = "PMIX_MCA_gds=hash";
        setenv("PMIX_MCA_gds", "hash", 1);
    }
    const int timeout = timeout_seconds();
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        error = std::string("pipe: ") + std::strerror(errno);
        return std::nullopt;
    }
    pid_t pid = fork();
    if (pid < 0) {
        error = std::string("fork: ") + std::strerror(errno);
        close(fds[0]);
        close(fds[1]);
        return std::nullopt;
    }
    if (pid == 0) {
        close(fds[0]);
        signal(SIGALRM, SIG_DFL);
        Reply r = query_server(timeout);
        _exit(write_all(fds[1], &r, sizeof r) ? 0 : 1);
    }
    close(fds[1]);

    Reply r;
    size_t got = 0;
    bool timed_out = false;
    const long long deadline = now_ms() + static_cast<long long>(timeout) * 1000;
    while (got < sizeof r) {
        long long left = deadline - now_ms();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        pollfd p{fds[0], POLLIN, 0};
        int n = poll(&p, 1, static_cast<int>(left));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        if (n == 0) {
            timed_out = true;
            break;
        }
        ssize_t rd = read(fds[0], reinterpret_cast<char*>(&r) + got, sizeof r - got);
        if (rd < 0 && errno == EINTR) continue;
        if (rd <= 0) break;  // EOF: the child died before answering
        got += static_cast<size_t>(rd);
    }
    close(fds[0]);
    if (got < sizeof r) kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (timed_out) {
        error = "the PMIx server (" + std::string(std::getenv("PMIX_NAMESPACE")) + ") did not answer within " +
                std::to_string(timeout) + " s (NUMABIND_PMIX_TIMEOUT)";
        return std::nullopt;
    }
    if (got < sizeof r) {
        error = "the PMIx query process died" +
                (WIFSIGNALED(status) ? " (signal " + std::to_string(WTERMSIG(status)) + ")" : std::string()) +
                " before answering";
        return std::nullopt;
    }
    r.message[sizeof r.message - 1] = '\0';
    if (!r.ok) {
        error = r.message;
        return std::nullopt;
    }
    LocalRank lr;
    lr.rank = r.rank;
    lr.source = std::string("PMIx PMIX_LOCAL_RANK (") + r.message + ", " + wait_for_the_node(r.size, timeout) + gds + ")";
    if (r.size > 0) {
        lr.size = r.size;
        lr.size_source = r.size_from_peers ? "PMIx PMIX_LOCAL_PEERS" : "PMIx PMIX_LOCAL_SIZE";
    }
    return lr;
}

}  // namespace numabind
