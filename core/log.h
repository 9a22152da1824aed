// Debug logging (SMCR_DEBUG=1, or level 2 for per-message traces) and the
// process-wide counters that smc_run's tests and diagnostics read.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace smcr {

int log_level();  // 0 quiet (default), 1 connection events, 2 protocol traces
void log_write(int level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

#define SMCR_LOG(level, ...)                                   \
  do {                                                         \
    if (::smcr::log_level() >= (level)) ::smcr::log_write((level), __VA_ARGS__); \
  } while (0)

// Why a TCP connection did not become SMC-R. Stable names: they appear in the
// stats file and in logs.
enum class Fallback : int {
  kBpfNotLoaded,
  kPeerNoOption,      // SYN/SYN-ACK did not both carry the option
  kPeerDeclined,      // peer sent a CLC Decline
  kPeerNotClc,        // peer sent bytes that are not CLC: it is not talking SMC-R
  kProtocolError,     // malformed CLC message
  kReservedValue,     // reserved enumerated value (e.g. MTU) -> Decline
  kNoFabric,          // no fabric reaches the peer (e.g. verbs GID, other host)
  kTimeout,           // CLC or first-contact LLC did not complete in time
  kResources,         // could not allocate RMB / link
  kInternal,
  kPolicy,            // the operator's policy keeps this connection on TCP
  kOptionUndecided,   // accepted child's option record did not complete in time
  kShortFlow,         // recent connections to this destination were short (short_flows.h)
  kOwnListener,       // a listener of this process nobody else accepts on (own_listeners.h)
  kLateConnect,       // a non-blocking connect whose TCP handshake outlasted the wait (late_connect.h)
  kCount
};
const char* fallback_name(Fallback f);

struct Counters {
  std::atomic<uint64_t> smc_active{0};     // connect()s that became SMC-R
  std::atomic<uint64_t> smc_passive{0};    // accept()s that became SMC-R
  std::atomic<uint64_t> fallback[static_cast<int>(Fallback::kCount)]{};
  std::atomic<uint64_t> tx_bytes{0};       // payload written into peer RMBEs
  std::atomic<uint64_t> rx_bytes{0};       // payload consumed from own RMBEs
  std::atomic<uint64_t> cdc_sent{0};
  std::atomic<uint64_t> cdc_received{0};
  std::atomic<uint64_t> cdc_in_memory{0};  // sent CDCs that went through the peer's control page only
  std::atomic<uint64_t> close_in_memory{0};  // ... of which C answering a peer that had closed (no wake-up)
  std::atomic<uint64_t> peer_doorbells{0};   // doorbell bytes written into the peer's readiness socket
  std::atomic<uint64_t> ready_set_marks{0};  // data told to the peer's epoll set through its ready set
  std::atomic<uint64_t> ready_set_wakes{0};  // ... that woke its sleeping thread (a send on its bell)
  std::atomic<uint64_t> bells_sent{0};      // readiness sockets passed to the peer alone
  std::atomic<uint64_t> bells_on_cdc{0};    // ... and on a CDC that went on the link anyway
  std::atomic<uint64_t> bells_fetched{0};   // peer readiness sockets fetched from its process (pidfd_getfd)
  std::atomic<uint64_t> bell_fetch_failed{0};  // ... named in its control page, but not to be had
  std::atomic<uint64_t> epoll_from_memory{0};  // epoll events found in memory, no readiness socket rung
  std::atomic<uint64_t> epoll_ctl_in_memory{0};  // epoll_ctl calls on SMC-R fds answered without a system call
  std::atomic<uint64_t> accept_unoffered{0};  // TCP children of opted-in listeners known without their record (bpfopt::offers_pending)
  std::atomic<uint64_t> link_wakeups{0};     // verbs: completion-channel events that woke the engine for a link
  std::atomic<uint64_t> link_app_polled{0};  // verbs: link messages an application thread took from the CQ itself
  std::atomic<uint64_t> link_failovers{0};       // links taken down with a survivor
  std::atomic<uint64_t> conn_failovers{0};       // connections moved to another link
  std::atomic<uint64_t> links_added{0};          // second links confirmed (ADD LINK)
  std::atomic<uint64_t> add_link_rejected{0};    // ADD LINK refused or failed
  std::atomic<uint64_t> llc_sent{0};
  std::atomic<uint64_t> llc_received{0};
  std::atomic<uint64_t> test_links_answered{0};  // our TEST LINKs the peer echoed (keepalive)
  std::atomic<uint64_t> lgr_created{0};    // first contacts: new link groups
  std::atomic<uint64_t> lgr_reused{0};     // subsequent contacts over an existing link group
  std::atomic<uint64_t> rmb_pooled{0};     // RMBs kept by their group after an orderly close
  std::atomic<uint64_t> rmb_reused{0};     // subsequent contacts on a pooled RMB (no memfd, no CONFIRM RKEY)
  std::atomic<uint64_t> rmb_pool_evicted{0};  // pooled RMBs deleted to keep the peer's table under RFC 7609 8.2's 255
  std::atomic<uint64_t> confirm_deferred{0};  // accept()s that returned before the client's Confirm was read
  std::atomic<uint64_t> confirm_waits{0};     // application calls that waited for such a Confirm
  std::atomic<uint64_t> clc_threaded{0};      // accept()s whose client was silent: its CLC ran on a thread
  std::atomic<uint64_t> clc_connect_async{0};  // connect()s whose server had not accepted yet: the CLC finished on a thread
  std::atomic<uint64_t> clc_early_bytes{0};    // bytes such a connect()'s application wrote before the handshake ended (kept, then sent)
  std::atomic<uint64_t> clc_abandoned{0};  // handshakes on a thread whose application closed the fd first (not a fallback)
  std::atomic<uint64_t> aborts{0};
  std::atomic<uint64_t> peer_vanished{0};  // peers whose process ended unclosed, having read everything (a FIN, not a reset)
  std::atomic<uint64_t> handovers{0};     // connections relayed to a forked child
  std::atomic<uint64_t> rehomed{0};       // connections given to a forked child with a link of its own
  std::atomic<uint64_t> adopted{0};       // connections taken from the parent process that way
  std::atomic<uint64_t> rehomed_peer{0};  // connections the peer moved to another of its processes
  std::atomic<uint64_t> exec_carried{0};  // connections this process took along into a program it exec'd
  std::atomic<uint64_t> exec_adopted{0};  // ... and the new program took over (both in the same file: same pid)
  std::atomic<uint64_t> exec_pending{0};  // connections a forked child's exec left to this program to take on first use
  std::atomic<uint64_t> link_send_errors{0};
  std::atomic<int> last_link_send_errno{0};
  std::atomic<uint64_t> protocol_violations{0};
};
Counters& counters();
void count_fallback(Fallback f);

// "key value" lines, in $SMCR_STATS_DIR/smcr-<pid>.txt (written atomically:
// a temporary file, then rename). Written at exit (and _exit), and kept current while the
// process runs: the engine thread rewrites it, when the counters changed, at
// most every kStatsRefreshMs, so that a process killed by a signal's default
// action (SIGTERM, SIGKILL, ...), which runs no exit code, leaves its counters
// as of then. (A handler of our own for SIGTERM & co. would have to hide
// itself from the application's sigaction() and could not cover SIGKILL.)
// A file that cannot be written is reported once on stderr (path, errno).
std::string format_counters();
// The same without allocating (the text is cut at cap - 1 bytes); returns
// its length.
size_t format_counters_to(char* buf, size_t cap);
// Adds the counters of `text` (format_counters' lines) to ours: an exec'd
// program keeps the counts of the program it replaced (same pid, same file).
void add_counters(const char* text);
void write_stats_file();
// At _exit (which runs no library destructor): the same file, written with
// no allocation, no lock held for long and no message, so that it is safe
// wherever _exit may be called (a signal handler included).
void write_stats_file_from_exit();
bool stats_enabled();
constexpr int kStatsRefreshMs = 250;
// How long the engine may sleep for the refresh (-1: no stats file asked for).
int stats_refresh_ms();
// Rewrites the file if kStatsRefreshMs have passed since the last look and
// the counters changed (engine thread).
void refresh_stats_file(int64_t now_ms);

}  // namespace smcr
