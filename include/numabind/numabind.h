/* numabind.h — the stable C API of libnumabind (libnumabind.so.0).
 *
 * Binds the calling process — every one of its threads — to the CPUs and memory local
 * to its accelerator(s), planning the node exactly as `numabind run` does (same local rank
 * sources, device ownership, --device-match and --topology), from inside a program:
 * workers started by torch.multiprocessing.spawn, Lightning, Accelerate, DataLoader.
 *
 * ABI rules: only numabind_* symbols are exported (version node NUMABIND_1); the option
 * and result types are opaque and grow through new keys, never new fields; every function
 * returns a status code or a pointer and never lets an exception out. Strings returned in
 * `char **` parameters are freed with numabind_free(). Error messages are one line, the
 * same as the command's (without its "numabind: " prefix). Not async-signal-safe; bind and
 * reapply call setenv(3), so avoid them while other threads read the environment.
 */
#ifndef NUMABIND_NUMABIND_H
#define NUMABIND_NUMABIND_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NUMABIND_API_VERSION 4  /* 2: numabind_plan_json, "error_kind"; 3: options smt, omp, ucx; "nics", "omp_kept";
                                   4: option threads; "device_rule", "omp_notice"; torchrun's device rule */

/* Status codes (the command's exit statuses where they overlap). */
#define NUMABIND_OK 0
#define NUMABIND_ERROR 1       /* binding not possible or failed (no accelerator, syscall...) */
#define NUMABIND_USAGE 2       /* a bad option key or value, a NULL argument */
#define NUMABIND_NOMEM 3       /* out of memory */

/* "0.1.0": the library's version; numabind_api_version(): NUMABIND_API_VERSION it implements. */
const char *numabind_version(void);
int numabind_api_version(void);

typedef struct numabind_options numabind_options;
typedef struct numabind_result numabind_result;

/* Options, all optional, as strings (the command's spelling):
 *   mode          none, node (default), socket, exclusive, core-complex
 *   mem           prefer (default), bind, interleave, none
 *   local_rank    this process's rank on the node      (default: launcher variables)
 *   ntasks        tasks on the node                     (default: launcher variables)
 *   devices       visible physical accelerator indexes, "0,1" (default: CUDA_VISIBLE_DEVICES...)
 *   device_match  VVVV[:DDDD] or class=0xCCSS, comma-separated
 *   topology      hwloc XML of this machine instead of discovering it
 *   allowed_cpus  CPUs the tasks may use (default: this process's cpuset)
 *   rank_source   auto (default) or env
 *   fallback      fail (default) or warn: on failure bind nothing and return NUMABIND_OK
 *                 with "bound": false, the reason in "error" and "error_kind" ("no_accelerator":
 *                 none found or none visible; "error": anything else) (NUMABIND_MODE=none is set)
 *   migrate       0 (default) or 1: move the pages already resident to the home node(s)
 *   ucx           0 (default) or 1: also set UCX_NET_DEVICES to the task's nearest fabric NICs
 *                 unless the user set it (NUMABIND_NICS and the result's "nics" always)
 *   smt           all (default) or 1: one hardware thread per core (the first of its siblings)
 *   omp           0 (default) or 1: also set OMP_NUM_THREADS (one per core), OMP_PLACES (one
 *                 place per core, "{0,32},{1,33}") and OMP_PROC_BIND=close, each only where the
 *                 environment has no value of its own; the result's "omp_kept" names those kept
 *   threads       1-65536: OMP_NUM_THREADS for the process's children, replacing any value
 *                 (torchrun's default of 1 included)
 *   ntasks and local_rank are limited to 65536 local tasks (a larger value is NUMABIND_USAGE).
 *   migrate, ucx and omp also take yes/no (and y/n, true/false), as plugstack.conf does.
 * The devices: a local rank from torchrun (LOCAL_RANK with TORCHELASTIC_RUN_ID or GROUP_RANK)
 * owns the visible device of its index (r mod n), as torch.numa.binding; any other source
 * gives tasks fewer than the devices contiguous blocks ("device_rule": "local-rank"/"blocks").
 * numabind_options_set returns NUMABIND_USAGE for an unknown key (values are checked by bind). */
numabind_options *numabind_options_new(void);
int numabind_options_set(numabind_options *options, const char *key, const char *value, char *error,
                         size_t error_size);
void numabind_options_free(numabind_options *options);

/* Plans this node and applies this task's share to every thread of the process: CPU
 * affinity (each thread), memory policy (each thread; see the README for threads that block
 * signals), NUMABIND_* variables (setenv) and, with migrate=1, page migration. On success
 * *result (may be NULL if not wanted) holds what was applied; free it with numabind_result_free.
 * On failure `error` (if not NULL) receives the one-line reason. */
int numabind_bind(const numabind_options *options, numabind_result **result, char *error, size_t error_size);

/* For forked workers (DataLoader): checks every thread against the binding recorded in
 * NUMABIND_CPUS/NUMABIND_MEMS/NUMABIND_MEM_POLICY and re-applies it where it was lost.
 * NUMABIND_MODE unset or none: nothing to check (result says so). */
int numabind_reapply(numabind_result **result, char *error, size_t error_size);

/* The result as JSON (owned by the result):
 *   bind:    {"bound", "error", "mode", "local_rank", "local_rank_source", "ntasks", "cpus", "mems",
 *             "mem_policy", "kernel_mem_policy", "device", "devices", "device_pci", "threads",
 *             "threads_mem_policy", "threads_mem_policy_missing", "threads_not_as_planned",
 *             "migrated", "pages_moved", "pages_off_home_before", "pages_off_home_after",
 *             "warnings", "env", "omp_kept" (omp=1 only), "device_rule", "omp_notice" (a line
 *             when torchrun's OMP_NUM_THREADS=1 was kept for a task of several CPUs, else null)}
 *            threads_not_as_planned: [{"tid", "why"}]: exactly the threads whose CPUs or
 *            memory policy are not the plan's (one that blocks every signal numabind could
 *            use, did not answer within 1 s, or started faster than it could be bound).
 *   Calls of numabind_bind and numabind_reapply are serialised (one lock over the whole
 *   call); the memory-policy signal is never one the program handles or blocks.
 *   reapply: {"checked", "lost": [lines], "reapplied", "threads", "threads_mem_policy", "warnings", ...} */
const char *numabind_result_json(const numabind_result *result);
int numabind_result_threads(const numabind_result *result);   /* threads bound, -1 if none */
long numabind_result_pages_moved(const numabind_result *result); /* pages migrated, 0 without migrate */
void numabind_result_free(numabind_result *result);

/* What `numabind plan --json` prints for the options' mode, mem, ntasks (else the launcher's
 * variables), devices, device_match, topology, allowed_cpus and smt: the whole node's plan,
 * nothing applied (API version 2). local_rank, fallback and migrate are not used. */
int numabind_plan_json(const numabind_options *options, char **json, char *error, size_t error_size);

/* The CUDA ordinal (what torch.device("cuda", i) takes) of this process's device
 * (NUMABIND_DEVICE) under the current CUDA_VISIBLE_DEVICES; NUMABIND_ERROR when the process
 * is not bound to a device, the device is not among the topology's (a bind from another
 * topology XML: pass that XML) or CUDA does not see it (API version 2). */
int numabind_cuda_index(const char *topology, const char *device_match, int *index, char *error, size_t error_size);

/* What `numabind show --json` prints for the calling process. topology/device_match may be NULL. */
int numabind_placement_json(const char *topology, const char *device_match, char **json, char *error,
                            size_t error_size);

/* What `numabind show --pid PID --json` prints (threads, memory, mismatches). */
int numabind_inspect_json(int pid, const char *topology, const char *device_match, char **json, char *error,
                          size_t error_size);

void numabind_free(void *pointer);

#ifdef __cplusplus
}
#endif

#endif /* NUMABIND_NUMABIND_H */
