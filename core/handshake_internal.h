// What the pieces of the CLC handshake share (core/handshake_*.cc): the
// byte I/O on the TCP socket, the outcomes, the fabric resources a handshake
// holds, the RMBs of a new connection, and the steps that only the verbs
// fabric has. Private to core/handshake_*.cc; core/handshake.h is the API.
//   handshake_common.cc  what both sides use (and the verbs steps' stand-ins
//                        where the verbs fabric is not built)
//   handshake_client.cc  clc_client and what only the client does
//   handshake_server.cc  clc_server and what only the server does
//   handshake_verbs.cc   the verbs fabric's steps, add link (needs rdma-core)
#pragma once

#include <sched.h>
#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/clc.h"
#include "core/cpu_relax.h"
#include "core/fabric.h"
#include "core/fabric_shm.h"
#include "core/handshake.h"
#include "core/link_group.h"
#include "core/rmb.h"
#include "core/spin_backoff.h"
#include "core/sys.h"

namespace smcr {

// The RMB size and readiness socket (HandshakeRequest::bell_fd) of the
// handshake running on this thread (handshakes run on the application
// thread inside connect()/accept(), or on one of their own, one at a time
// per thread).
extern constinit thread_local uint32_t t_rmb_size;
extern constinit thread_local int t_bell_fd;
struct ScopedHandshakeContext {
  explicit ScopedHandshakeContext(uint32_t size, int bell_fd) {
    t_rmb_size = size;
    t_bell_fd = bell_fd;
  }
  ~ScopedHandshakeContext() {
    t_rmb_size = 0;
    t_bell_fd = -1;
  }
};
uint32_t conn_rmb_size();

// The time a subsequent contact's CONFIRM RKEY exchange may take: the LLC
// timeout, but no later than `margin_ms` before the CLC `deadline` (ms), so
// that a handshake queued behind many others on its group (one exchange at
// a time) Declines while its peer still waits for it, instead of leaving
// the peer to time out (after an Accept, a reset). 0: no time left.
int rkey_exchange_budget_ms(int64_t deadline, int64_t margin_ms);
// What a Decline needs to reach a peer that is still waiting: sent, and
// read by a peer that may be descheduled for a while.
constexpr int64_t kDeclineMarginMs = 500;

bool random_u32(uint32_t* out);
bool random_nonzero_u24(uint32_t* out);

// ------------------------------------------------------------ TCP byte I/O

bool send_all(int fd, const std::vector<uint8_t>& bytes, int64_t deadline);

enum class Recv { kMessage, kNotClc, kMalformedHeader, kEof, kTimeout, kError };

// SMCR_CLC_SPIN_US (0: never; default 100): how long a handshake watches
// for the peer's next CLC message before it sleeps.
int64_t clc_spin_ns();

// Watching the socket for the peer's next CLC bytes, up to SMCR_CLC_SPIN_US.
// A peer on this host answers within tens of microseconds, less than a
// sleep and wake-up costs here. Past the first 5 µs the watch yields the CPU
// between looks: on a busy machine the peer we wait for may be waiting for
// this very CPU.
//
// A watch that is only a wait (the caller sleeps after it anyway) may skip
// itself when the last ones saw nothing (`backoff`): on a loaded machine
// the peer rarely answers within the spin, and each look and yield is a
// system call.
class ClcSpin {
 public:
  explicit ClcSpin(bool on = true, SpinBackoff* backoff = nullptr)
      : backoff_(on && backoff && backoff->worth_trying() ? backoff : nullptr),
        start_(sys::now_ns()),
        until_(start_ + (on && (!backoff || backoff_) ? clc_spin_ns() : 0)) {}
  ~ClcSpin() {
    if (backoff_ && !expired_) backoff_->hit();
  }
  // After a look that found nothing: false once the spin is over, else
  // pauses or yields before the next look.
  bool again() {
    int64_t now = sys::now_ns();
    if (now >= until_) {
      if (backoff_ && !expired_) backoff_->missed();
      expired_ = true;
      return false;
    }
    if (now - start_ >= 5000) sched_yield();
    else cpu_relax();
    return true;
  }

 private:
  SpinBackoff* backoff_;
  int64_t start_, until_;
  bool expired_ = false;
};

// The waits for a CLC answer in this process: how their spins have fared.
extern SpinBackoff g_answer_spins;

// A whole CLC message server_may_run_inline() has just peeked at (on this
// thread, before clc_server reads it): recv_clc need not look again.
struct PeekedMessage {
  int fd = -1;
  size_t length = 0;
};
extern constinit thread_local PeekedMessage t_peeked;

// Reads one whole CLC message from the stream, or leaves the stream untouched
// when the next bytes are not CLC (so the application still gets them).
Recv recv_clc(int fd, int64_t deadline, std::vector<uint8_t>* out, clc::Header* hdr, bool spin = true);

// ------------------------------------------------------------ outcomes

HandshakeOutcome fallback(Fallback why, uint32_t diag = 0);
HandshakeOutcome terminate(Fallback why, int error);
HandshakeOutcome send_failed();
HandshakeOutcome decline(int fd, uint32_t code, Fallback why, int64_t deadline, uint8_t version = 1);
HandshakeOutcome decline_no_randomness(int fd, int64_t deadline, uint8_t version = 1);
HandshakeOutcome undecodable(int fd, const char* what, clc::DecodeError err, int64_t deadline);
HandshakeOutcome from_unexpected(int fd, Recv r, const std::vector<uint8_t>& msg, const clc::Header& h,
                                 int64_t deadline, const char* waiting_for);

// ------------------------------------------------------------ addresses

void fill_ip_area(const sockaddr_storage& ss, clc::Proposal* p);
bool local_address(int fd, sockaddr_storage* ss);
inline bool same_id(const clc::Gid& a, const clc::Gid& b) { return a == b; }

// ------------------------------------------------------------ fabric, RMBs

// One side's fabric resources while the handshake runs; whatever is still
// here when the handshake fails is released by the destructor.
struct FabricSetup {
  std::unique_ptr<Link> link;
  LocalRmb rmb;     // ours, RMBE index 1
  RemoteRmb peer;   // the peer's RMBE
  clc::Gid gid{};   // what we announce for the link
  clc::Mac mac{};
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint8_t mtu_code = 5;
  std::optional<clc::Ece> ece;  // agreed and applied to the link's QP
  int memfd = -1;       // shm: ConnRmbs::memfd, peer_memfd
  int peer_memfd = -1;
  ~FabricSetup() {
    sys::close_reset(&memfd);
    sys::close_reset(&peer_memfd);
    if (peer.addr && link) link->release_remote_rmb(&peer);
    else if (peer.addr) shm_unmap_remote(&peer);
    if (rmb.addr && link) link->free_local_rmb(&rmb);
    else if (rmb.addr) shm_free_rmb(&rmb);
  }
};

clc::AcceptConfirm rmb_message(clc::Type type, bool first_contact, const LinkIdentity& link, uint32_t psn,
                               const LocalRmb& rmb, uint32_t alert_token);
// Names this handshake's readiness socket (t_bell_fd) in `rmb`'s control
// page under `alert_token` (core/cdc_mem.h, BellRecord); shm only.
void publish_bell(const LocalRmb& rmb, uint32_t alert_token);
bool new_alert_token(uint32_t* token);
HandshakeOutcome establish_on(LinkGroup* group, ConnRmbs* rmbs, uint32_t local_token, uint32_t peer_token, int tcp_fd,
                              bool first_contact);

inline constexpr uint8_t kSecondLinkNum = 2;
uint8_t max_links();

// The second link of a first contact (RFC 3.5.1.6, Figure 9), as it stands
// once both sides have confirmed it (a verbs link).
struct SecondLink {
  std::unique_ptr<Link> link;
  LocalRmb rmb;      // alias of the first link's RMB memory
  RemoteRmb peer;
  LinkIdentity local, remote;
};

// ------------------------------------------------- the verbs fabric's steps
// What the client and server flows do on the verbs fabric (RoCE) only:
// handshake_verbs.cc, built where rdma-core's headers are found. Without
// them, handshake_common.cc's stand-ins say "not available": no port is ever
// chosen (the Proposal names the shm GID), a client that names a GID of
// another host is declined, and the steps that need a verbs link are never
// reached.

struct VerbsPort;  // core/fabric_verbs.h
// The verbs port a client's Proposal named; null: none (the shm GID).
using VerbsPortRef = std::shared_ptr<const VerbsPort>;

// Whether the verbs fabric is built in.
bool verbs_fabric_built();
// Client, building its Proposal: for a peer on another host (SMCR_FABRIC
// auto) or any (verbs), the port of the TCP connection's local address, whose
// GID, MAC, ECE and SMC-Rv2 offer go into *prop.
VerbsPortRef verbs_client_offer(int fd, bool have_local, const sockaddr_storage& local_addr,
                                const sockaddr_storage& peer, clc::Proposal* prop);
// Client, after a first-contact Accept that names no shm GID of ours.
std::optional<HandshakeOutcome> verbs_client_setup(int fd, const VerbsPort& port, const clc::AcceptConfirm& acc,
                                                   uint32_t peer_size, int64_t deadline, FabricSetup* fs);
// Client, after its CONFIRM LINK reply on a verbs link `first`.
void verbs_client_add_second_link(LinkGroup* g, Link* first, const clc::AcceptConfirm& acc, uint32_t peer_size,
                                  ConnRmbs* rmbs, std::optional<std::array<uint8_t, 44>>* stray);
// Server, first contact for a client GID that is not ours on shm, before
// the Accept: a port for the TCP connection's local address (an IPv4-mapped
// GID for SMC-Rv2, `linux_v2`), a link with our RMB, ECE agreed with
// `client_ece`; else the Decline (in `answer_version`).
std::optional<HandshakeOutcome> verbs_server_prepare(int fd, const std::optional<clc::Ece>& client_ece, bool linux_v2,
                                                     uint8_t answer_version, int64_t deadline, FabricSetup* fs);
// Server, after the Confirm: the link connected to the client's QP.
std::optional<HandshakeOutcome> verbs_server_complete(int fd, const clc::AcceptConfirm& conf, uint32_t peer_size,
                                                      int64_t deadline, FabricSetup* fs);
// Server, once the first (verbs) link is confirmed.
std::optional<SecondLink> verbs_server_add_second_link(Link* first, const LocalRmb& rmb,
                                                       const clc::AcceptConfirm& conf, uint32_t peer_size);

}  // namespace smcr
