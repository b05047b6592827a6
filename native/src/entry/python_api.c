/* What the Python layer asks the native layer (declared for cffi in
 * native/build_native.py; called only through mpi_collectives/base/mpi.py).
 * The functions return int, never void: a void one would make cffi refer to
 * Py_None, a data symbol the C conformance harness cannot resolve. */
#include "agreement.h"
#include "caller_cpus.h"
#include "comm_record.h"
#include "counts.h"
#include "common.h"
#include "devices.h"
#include "end_job.h"
#include "family.h"
#include "flight.h"
#include "launcher_abort.h"
#include "library.h"
#include "node.h"
#include "loader.h"
#include "phases.h"
#include "phases_watchdog.h"
#include "settings.h"
#include "signature.h"
#include "stop_signals.h"
#include "waits.h"

extern int mpic_trampoline_attached_flag;

MPIABI_EXPORT const char *mpic_family_name(void) { return mpic_family ? mpic_family->name : "none"; }
MPIABI_EXPORT const char *mpic_family_detail(void) { return mpic_family_reason; }
MPIABI_EXPORT const char *mpic_library_path(void) { return mpic_loaded_path; }
MPIABI_EXPORT const char *mpic_load_report(void) { return mpic_search_report; }
MPIABI_EXPORT const char *mpic_load_rule_text(void) { return mpic_load_rule; }
MPIABI_EXPORT const char *mpic_passed_over_text(void) { return mpic_passed_over; }
MPIABI_EXPORT const char *mpic_missing_functions(void) { return mpic_missing; }
MPIABI_EXPORT int mpic_we_initialized(void) { return mpic_initialized_by_us; }
MPIABI_EXPORT int mpic_thread_policy_value(void) { return mpic_settings.thread_level; }
MPIABI_EXPORT int mpic_trampoline_attached(void) { return mpic_trampoline_attached_flag; }
MPIABI_EXPORT int mpic_is_up(void) { return mpic_mpi_is_up(); }
/* For mpi_collectives.base.ending.launch_ends_if_start_up_fails: a rank whose start-up failed before MPI_Init. */
MPIABI_EXPORT int mpic_abort_launch_before_init(int code) { return mpic_launcher_abort(code); }

/* For mpi_collectives.base.mpi.set_local_devices, before the first collective. */
MPIABI_EXPORT int mpic_set_local_devices(int n) { return mpic_devices_set_local(n); }
MPIABI_EXPORT int mpic_max_local_devices(void) { return MPIC_MAX_LOCAL_DEVICES; }

/* For mpi_collectives.services.tuning (MPI_COLLECTIVES_BIND_CPUS=2), before JAX's backend exists. */
MPIABI_EXPORT int mpic_bind_callers(const int *cpus, int n) { return mpic_caller_cpus_set(cpus, n); }

/* initialize(): the node path's limits that `mpi-collectives tune` measured on
 * this node (the tuning file's entry), given before JAX's backend exists, so
 * before XLA creates any communicator; only where the user set none of them.
 * direct and round (MPI_COLLECTIVES_NODE_PATH_DIRECT, _ROUND) are agreed by
 * the ranks of each window when it is made, as the settings are. */
MPIABI_EXPORT int mpic_set_node_path(int mode, int collectives, int min_bytes, int max_bytes, int across_nodes,
                                     int direct, int round) {
  if (mode < 0 || mode > 2 || collectives < 0 || collectives > 15 || min_bytes < 0 || max_bytes < 0 ||
      across_nodes < 0 || across_nodes > 1 || direct < 0 || direct > 1 || round < 0 || round > 65536)
    return 1;
  mpic_settings.node_path = mode;
  mpic_settings.node_path_direct = direct;
  mpic_settings.node_path_round = round;
  mpic_settings.node_path_collectives = collectives;
  mpic_settings.node_path_min = min_bytes;
  mpic_settings.node_path_max = max_bytes;
  mpic_settings.node_path_across_nodes = across_nodes;
  return 0;
}
MPIABI_EXPORT int mpic_set_node_crowded(int yes) {
  mpic_node_set_crowded(yes);
  return 0;
}
MPIABI_EXPORT int mpic_callers_moved(void) { return mpic_caller_cpus_moved(); }

/* initialize(): MPI_COLLECTIVES_STALL_REPORT and _TIMEOUT for the wait at MPI_Finalize (node.h). */
MPIABI_EXPORT int mpic_set_finalize_waits(double report_s, double limit_s) {
  return mpic_node_set_finalize_waits(report_s, limit_s);
}

/* The node path's windows this rank belongs to (node.h): for the harness and diagnostics. */
MPIABI_EXPORT int mpic_node_windows(int *live, int *kept, long long *bytes, int *returning) {
  mpic_node_windows_held(live, kept, bytes, returning);
  return 0;
}

/* This process's counts (counts.h), for the scale bench. */
MPIABI_EXPORT int mpic_counts(long long *out, int max) { return mpic_counts_read(out, max); }
MPIABI_EXPORT const char *mpic_counts_name(int which) { return mpic_count_name(which); }

/* Ends the job with the caller's line (end_job.c); never returns. */
MPIABI_EXPORT int mpic_end_job(const char *line) { mpic_end_job_line(line); }

/* For mpi_collectives.services.peers: calls now waiting for other ranks, and how many
 * such calls have begun. Two samples with the same count of begun calls and
 * a call waiting in both mean one wait has lasted from the first to the second. */
MPIABI_EXPORT int mpic_wait_state(long *waiting, unsigned long *begun) {
  *begun = __atomic_load_n(&mpic_waits_begun, __ATOMIC_RELAXED);
  *waiting = __atomic_load_n(&mpic_waiting_now, __ATOMIC_RELAXED);
  return 0;
}

/* For mpi_collectives.services.stall: the collective this rank waits in (flight.h),
 * its words, its communicator's members, and the record. */
MPIABI_EXPORT int mpic_stall_current(uint64_t *sig, int *comm_id, unsigned *seq, int64_t *started_ns) {
  return mpic_flight_current(sig, comm_id, seq, started_ns);
}
MPIABI_EXPORT int mpic_stall_describe(uint64_t sig, char *out, int len) {
  mpic_describe(sig, out, (size_t)len);
  return 0;
}
MPIABI_EXPORT int mpic_stall_members(int comm_id, int *out, int max) { return mpic_record_members(comm_id, out, max); }
MPIABI_EXPORT int mpic_flight_record(char *out, int len) { return (int)mpic_flight_text(out, (size_t)len); }
MPIABI_EXPORT int64_t mpic_monotonic(void) { return mpic_monotonic_ns(); }

/* For mpi_collectives.services.phases (a test of a pytest suite is a phase): services/phases.h. */
MPIABI_EXPORT int mpic_phases_begin_all(void) { return mpic_phases_start(); }
MPIABI_EXPORT uintptr_t mpic_phases_comm_handle(void) { return (uintptr_t)mpic_phases_comm(); }
MPIABI_EXPORT int mpic_phases_tag(int64_t phase) { return mpic_phase_tag(phase); }
MPIABI_EXPORT int mpic_phases_enter(int64_t phase, const char *name, double timeout_s) {
  mpic_phase_begin(phase, name, timeout_s);
  return 0;
}
MPIABI_EXPORT int mpic_phases_given_up(int *out, int max) { return mpic_phase_given_up(out, max); }
MPIABI_EXPORT int mpic_phases_settle(const int *triples, int n, double timeout_s) {
  return mpic_agreement_settle(triples, n, timeout_s);
}
MPIABI_EXPORT int mpic_phases_stuck(char *where, int len) { return mpic_phase_stuck(where, len); }
MPIABI_EXPORT int mpic_phases_watchdog(int rank, int size, double hold_s) {
  return mpic_phases_watchdog_start(rank, size, hold_s);
}
/* (int, not void: cffi's wrapper of a void function returns Py_None, which a program that loads this
 * library outside Python, the conformance and sanitizer harnesses, cannot resolve) */
MPIABI_EXPORT int mpic_phases_beat(int voting) {
  mpic_phases_watchdog_beat(voting);
  return 0;
}
MPIABI_EXPORT int mpic_phases_progress(const char *words) {
  mpic_phases_watchdog_progress(words);
  return 0;
}
MPIABI_EXPORT int mpic_stop_asked(void) { return __atomic_load_n(&mpic_stopping, __ATOMIC_SEQ_CST); }
