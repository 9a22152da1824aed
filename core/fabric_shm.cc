#include "core/fabric_shm.h"

#include "core/process.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/cdc_mem.h"
#include "core/log.h"
#include "core/random.h"
#include "core/stream_copy.h"
#include "core/sys.h"
#include "core/wire.h"

namespace smcr {

namespace {

constexpr uint8_t kShmGidMarker[4] = {0xfd, 0x53, 0x4d, 0x48};  // "SMH": a ULA nobody routes
// "SMCRSHM2": the control page's slot words number their publishes
// (core/cdc_mem.cc); a peer of the first layout fails the rendezvous and the
// connection stays TCP.
constexpr uint64_t kHelloMagic = 0x534d435253484d32ull;
constexpr size_t kHelloLen = 8 + 4 + 4 + 8 + 4 + 4 + 8 + 4;
constexpr size_t kReplyLen = 8 + 4;

// The RKey, VA and QPN of a pending rendezvous are the only proof a client
// saw our Accept (fabric_shm.h): never made from anything guessable.
bool random_u64(uint64_t* v) { return random_bytes(v, sizeof *v); }

uint32_t fnv1a(const char* s, size_t n, uint32_t h = 2166136261u) {
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<uint8_t>(s[i])) * 16777619u;
  return h;
}

uint32_t compute_host_key() {
  char buf[128] = {};
  int fd = static_cast<int>(smcr::sys::raw_syscall(SYS_openat, AT_FDCWD, "/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC));
  ssize_t n = 0;
  if (fd >= 0) {
    n = sys::read(fd, buf, sizeof buf - 1);
    sys::close(fd);
  }
  uint32_t h = fnv1a(buf, n > 0 ? static_cast<size_t>(n) : 0);
  char ns[64] = {};
  ssize_t m = smcr::sys::raw_syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/ns/net", ns, sizeof ns - 1);
  if (m > 0) h = fnv1a(ns, static_cast<size_t>(m), h);
  return h;
}

ShmIdentity make_identity() {
  ShmIdentity id;
  id.host_key = compute_host_key();
  uint64_t rnd = 0;
  // A GID without its random part names an abstract address another
  // process of this host could bind first, and a peer ID that of another
  // process (pid namespaces): no identity rather than such a one.
  if (!random_u64(&rnd)) return id;
  id.ok = true;
  uint32_t pid = static_cast<uint32_t>(getpid());
  std::memcpy(id.gid.data(), kShmGidMarker, 4);
  for (int i = 0; i < 4; ++i) {
    id.gid[4 + i] = static_cast<uint8_t>(id.host_key >> (24 - 8 * i));
    id.gid[8 + i] = static_cast<uint8_t>(pid >> (24 - 8 * i));
    id.gid[12 + i] = static_cast<uint8_t>(rnd >> (24 - 8 * i));
  }
  id.mac = {0x02, 0x53, 0x4d, static_cast<uint8_t>(id.host_key >> 16), static_cast<uint8_t>(id.host_key >> 8),
            static_cast<uint8_t>(id.host_key)};
  // Peer ID: 2 instance bytes (RFC A.2.1 suggests clock bits; random here so
  // restarts and forks differ) + the MAC.
  id.peer_id[0] = static_cast<uint8_t>(rnd >> 40);
  id.peer_id[1] = static_cast<uint8_t>(rnd >> 32);
  std::memcpy(id.peer_id.data() + 2, id.mac.data(), 6);
  return id;
}

struct IdentityCache {
  std::mutex mu;
  uint64_t generation = 0;  // process_generation() when made; 0: not yet
  ShmIdentity id;
};

sockaddr_un abstract_address(const clc::Gid& gid, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  char name[64];
  int n = snprintf(name, sizeof name, "smcr-shm-");
  for (uint8_t b : gid) n += snprintf(name + n, sizeof name - n, "%02x", b);
  a.sun_path[0] = '\0';
  std::memcpy(a.sun_path + 1, name, static_cast<size_t>(n));
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

bool send_with_fd(int sock, const std::vector<uint8_t>& bytes, int fd_to_pass) {
  return sys::sendmsg_with_fd(sock, bytes.data(), bytes.size(), fd_to_pass, MSG_DONTWAIT) ==
         static_cast<ssize_t>(bytes.size());
}


bool wait_readable(int fd, int64_t deadline_ms) {
  for (;;) {
    int64_t left = deadline_ms - sys::now_ms();
    pollfd p{fd, POLLIN, 0};
    int r = sys::poll(&p, 1, left > 0 ? static_cast<int>(left) : 0);
    if (r > 0) return true;
    if (r == 0 || errno != EINTR) return false;
  }
}

}  // namespace

const ShmIdentity& shm_identity() {
  static IdentityCache* cache = new IdentityCache();
  std::lock_guard<std::mutex> lock(cache->mu);
  // Made anew in a forked child (the identity names the process), without a
  // getpid() system call per connection.
  uint64_t here = process_generation();
  if (cache->generation != here) {
    cache->id = make_identity();
    // Asked again next time: randomness may be back (a later handshake
    // then gets an identity of its own).
    if (cache->id.ok) cache->generation = here;
  }
  return cache->id;
}

bool shm_gid_is_local(const clc::Gid& gid) {
  if (std::memcmp(gid.data(), kShmGidMarker, 4) != 0) return false;
  uint32_t key = (uint32_t{gid[4]} << 24) | (uint32_t{gid[5]} << 16) | (uint32_t{gid[6]} << 8) | gid[7];
  return key == shm_identity().host_key;
}

bool shm_make_sealed(const char* name, size_t bytes, int* fd_out, uint8_t** addr) {
  // Hidden at once: made on the engine thread, it would otherwise hold the
  // lowest free number while the application may be opening a file.
  int fd = sys::hide_fd(static_cast<int>(smcr::sys::raw_syscall(SYS_memfd_create, name, MFD_CLOEXEC | MFD_ALLOW_SEALING)));
  if (fd < 0) return false;
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 ||
      sys::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    sys::close(fd);
    return false;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    sys::close(fd);
    return false;
  }
  *fd_out = fd;
  *addr = static_cast<uint8_t*>(p);
  return true;
}

bool shm_alloc_rmb(uint32_t size, LocalRmb* out) {
  // The RMB, then the page where the peer writes its CDCs (core/cdc_mem.h).
  int fd = -1;
  uint8_t* p = nullptr;
  if (!shm_make_sealed("smcr-rmb", size + cdcmem::kControlBytes, &fd, &p)) return false;
  out->addr = p;
  out->size = size;
  out->control = out->addr + size;
  out->handle = fd;
  uint64_t rkey = 0;
  if (!random_u64(&rkey) || !random_u64(&out->vaddr)) {
    shm_free_rmb(out);
    *out = LocalRmb{};
    return false;
  }
  out->rkey = static_cast<uint32_t>(rkey);
  return true;
}

void shm_free_rmb(LocalRmb* rmb) {
  if (rmb->addr && !rmb->alias) munmap(rmb->addr, rmb->size + (rmb->control ? cdcmem::kControlBytes : 0));
  if (rmb->handle >= 0 && !rmb->alias) sys::close(rmb->handle);
  rmb->addr = nullptr;
  rmb->control = nullptr;
  rmb->handle = -1;
}

namespace {
// Maps an RMB's memfd shared: sealed against shrinking (a peer cannot
// SIGBUS us), at least `size` bytes, with the control page after them if
// the file has one (*control). Null if it is none of that.
uint8_t* map_sealed_rmb(int memfd, uint32_t size, bool* control, int* seals) {
  struct stat st;
  *seals = sys::fcntl(memfd, F_GET_SEALS);
  bool ok = *seals >= 0 && (*seals & F_SEAL_SHRINK) && fstat(memfd, &st) == 0 && S_ISREG(st.st_mode) &&
            st.st_size >= static_cast<off_t>(size) && size > 0;
  *control = ok && st.st_size >= static_cast<off_t>(size + cdcmem::kControlBytes);
  size_t mapped = size + (*control ? cdcmem::kControlBytes : 0);
  void* p = ok ? mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0) : MAP_FAILED;
  return p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
}
}  // namespace

bool shm_map_remote(int memfd, uint32_t size, RemoteRmb* out, int* keep) {
  bool control = false;
  int seals = -1;
  // A peer whose memfd has no control page after the RMB gets its CDCs as
  // link messages only.
  uint8_t* p = map_sealed_rmb(memfd, size, &control, &seals);
  if (keep && p) *keep = memfd;
  else sys::close(memfd);
  if (!p) {
    SMCR_LOG(1, "shm: peer RMB rejected (seals=%d size=%u)", seals, size);
    return false;
  }
  out->addr = p;
  out->size = size;
  out->control = control ? p + size : nullptr;
  return true;
}

bool shm_map_own(int memfd, uint32_t size, LocalRmb* out) {
  bool control = false;
  int seals = -1;
  uint8_t* p = map_sealed_rmb(memfd, size, &control, &seals);
  if (p && !control) {  // ours always has one (shm_alloc_rmb)
    munmap(p, size);
    p = nullptr;
  }
  if (!p) return false;
  out->addr = p;
  out->size = size;
  out->control = p + size;
  out->handle = -1;
  return true;
}

void shm_unmap_remote(RemoteRmb* rmb) {
  if (rmb->addr && !rmb->alias) munmap(rmb->addr, rmb->size + (rmb->control ? cdcmem::kControlBytes : 0));
  rmb->addr = nullptr;
  rmb->control = nullptr;
}

bool ShmLink::register_alias(const LocalRmb& memory, LocalRmb* out) {
  if (!memory.addr) return false;
  *out = memory;
  out->handle = -1;
  out->alias = true;
  return true;
}

void ShmLink::take_down() {
  failed_ = true;
  sys::shutdown(fd_, SHUT_RDWR);
}

std::string ShmLink::describe() const {
  char buf[96];
  snprintf(buf, sizeof buf, "fabric=shm link_fd=%d state=%s", fd_, failed_.load() ? "failed" : "up");
  return buf;
}

int ShmLink::peer_pid() const {
  int pid = peer_pid_.load(std::memory_order_relaxed);
  if (pid != 0) return pid;
  // The process that connected (or listened, for the client's end): what
  // the kernel recorded, not what the peer says of itself.
  ucred cred{};
  socklen_t len = sizeof cred;
  pid = sys::getsockopt(fd_, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.pid > 0 ? cred.pid : -1;
  peer_pid_.store(pid, std::memory_order_relaxed);
  return pid;
}

ShmLink::~ShmLink() {
  if (fd_ >= 0) sys::close(fd_);
}

bool ShmLink::write_remote(const RemoteRmb& rmb, uint32_t offset, const void* src, size_t len) {
  if (!rmb.addr || offset > rmb.size || len > rmb.size - offset || failed_) return false;
  // A connection moving links rewrites bytes from the mapping itself.
  if (src != rmb.addr + offset) copy_for_peer(rmb.addr + offset, src, len);
  return true;
}

bool ShmLink::post_message(std::span<const uint8_t, kLinkMessageLen> msg) {
  // The send syscall orders the preceding memcpy before the peer sees the
  // message. Blocking send with SO_SNDTIMEO: a peer that stops reading for
  // that long is treated as a failed link by the caller.
  for (;;) {
    ssize_t n = sys::send(fd_, msg.data(), msg.size(), MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(msg.size())) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
}

bool ShmLink::post_message_with_fd(std::span<const uint8_t, kLinkMessageLen> msg, int fd) {
  for (;;) {
    ssize_t n = sys::sendmsg_with_fd(fd_, msg.data(), msg.size(), fd, 0);
    if (n == static_cast<ssize_t>(msg.size())) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
}

bool ShmLink::drain_messages(const std::function<void(std::span<const uint8_t>)>& on_message) {
  // Up to kBatch messages per system call: a batch that comes back short
  // says the queue was empty, where one recvmsg per message needed one more
  // to learn that (a system call per engine wake-up, and an engine wakes up
  // for most link messages it gets).
  constexpr unsigned kBatch = 8;
  struct Slot {
    uint8_t buf[128];
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * sys::kMaxPassedFds)];
    iovec iov;
  };
  Slot slots[kBatch];
  mmsghdr msgs[kBatch];
  int errors = 0;
  for (;;) {
    for (unsigned i = 0; i < kBatch; ++i) {
      slots[i].iov = {slots[i].buf, sizeof slots[i].buf};
      msgs[i] = mmsghdr{};
      msgs[i].msg_hdr.msg_iov = &slots[i].iov;
      msgs[i].msg_hdr.msg_iovlen = 1;
      msgs[i].msg_hdr.msg_control = slots[i].control;
      msgs[i].msg_hdr.msg_controllen = sizeof slots[i].control;
    }
    int got = sys::recvmmsg(fd_, msgs, kBatch, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (got < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return !failed_;
      if (errno == EINTR) continue;
      // A peer that exits with unread messages in its own queue leaves us
      // ECONNRESET, reported once and ahead of what it sent before it died
      // (the kernel checks sk_err first): keep reading, so that its last
      // data and its C still arrive before we call the link failed.
      failed_ = true;
      if (++errors > 2) return false;
      continue;
    }
    errors = 0;
    // Every message's descriptors go to the hidden range first (as they
    // arrive), whatever becomes of the messages after it.
    int fds[kBatch][sys::kMaxPassedFds];
    size_t nfds[kBatch] = {};
    for (int i = 0; i < got; ++i) nfds[i] = sys::take_passed_fds(msgs[i].msg_hdr, fds[i], sys::kMaxPassedFds);
    auto close_fds_from = [&](int first) {  // of messages not delivered
      for (int j = first; j < got; ++j)
        for (size_t k = 0; k < nfds[j]; ++k) sys::close(fds[j][k]);
    };
    for (int i = 0; i < got; ++i) {
      if (msgs[i].msg_len == 0) {  // peer closed its end, and everything it sent has been read
        close_fds_from(i);
        failed_ = true;
        return false;
      }
      if (msgs[i].msg_hdr.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {  // not the message that was sent
        failed_ = true;
        if (++errors > 2) {
          close_fds_from(i);
          return false;
        }
        for (size_t k = 0; k < nfds[i]; ++k) sys::close(fds[i][k]);
        continue;
      }
      // At most one descriptor rides a message (a bell, an RMB memfd).
      attached_fd_ = nfds[i] > 0 ? fds[i][0] : -1;
      for (size_t k = 1; k < nfds[i]; ++k) sys::close(fds[i][k]);
      on_message(std::span<const uint8_t>(slots[i].buf, msgs[i].msg_len));
      if (attached_fd_ >= 0) sys::close(attached_fd_);  // nobody wanted it
      attached_fd_ = -1;
    }
    if (static_cast<unsigned>(got) < kBatch) return !failed_;  // the queue was empty
  }
}

bool ShmLink::wait_message(uint8_t (&out)[kLinkMessageLen], int timeout_ms) {
  int64_t deadline = sys::now_ms() + timeout_ms;
  for (;;) {
    if (!wait_readable(fd_, deadline)) return false;
    uint8_t buf[128];
    ssize_t n = sys::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    if (n == static_cast<ssize_t>(kLinkMessageLen)) {
      std::memcpy(out, buf, kLinkMessageLen);
      return true;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    failed_ = true;  // closed, error, or wrong-size message
    return false;
  }
}

std::unique_ptr<ShmLink> shm_connect(const clc::Gid& server_gid, const ShmHello& h, int client_rmb_fd,
                                     int64_t deadline_ms, int* server_rmb_fd) {
  *server_rmb_fd = -1;
  int fd = sys::hide_fd(sys::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (fd < 0) return nullptr;
  socklen_t len;
  sockaddr_un a = abstract_address(server_gid, &len);
  if (sys::connect(fd, reinterpret_cast<sockaddr*>(&a), len) != 0) {
    SMCR_LOG(1, "shm: rendezvous connect failed: %s", strerror(errno));
    sys::close(fd);
    return nullptr;
  }
  WireWriter w;
  w.be64(kHelloMagic);
  w.be32(h.server_qpn);
  w.be32(h.server_rkey);
  w.be64(h.server_vaddr);
  w.be32(h.client_qpn);
  w.be32(h.client_rkey);
  w.be64(h.client_vaddr);
  w.be32(h.client_rmb_size);
  if (!send_with_fd(fd, w.buffer(), client_rmb_fd) || !wait_readable(fd, deadline_ms)) {
    sys::close(fd);
    return nullptr;
  }
  uint8_t reply[64];
  int passed = -1;
  ssize_t n = sys::recv_with_fd(fd, reply, sizeof reply, &passed);
  WireReader r(std::span<const uint8_t>(reply, n > 0 ? static_cast<size_t>(n) : 0));
  uint64_t magic = r.be64();
  uint32_t status = r.be32();
  if (n != static_cast<ssize_t>(kReplyLen) || !r.ok() || magic != kHelloMagic || status != 0 || passed < 0) {
    if (passed >= 0) sys::close(passed);
    sys::close(fd);
    return nullptr;
  }
  timeval tv{10, 0};
  sys::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  *server_rmb_fd = passed;
  return std::make_unique<ShmLink>(fd);
}

ShmRendezvous& ShmRendezvous::instance() {
  static ShmRendezvous* r = new ShmRendezvous();
  return *r;
}

int ShmRendezvous::listener_fd() {
  MutexLock lock(mu_);
  if (listen_fd_ >= 0 && owner_generation_ != process_generation()) {
    // Inherited over fork: that socket is bound to the parent's GID.
    sys::close(listen_fd_);
    listen_fd_ = -1;
    pending_.clear();
  }
  if (listen_fd_ >= 0) return listen_fd_;
  if (!shm_identity().ok) return -1;
  owner_generation_ = process_generation();
  int fd = sys::hide_fd(sys::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (fd < 0) return -1;
  socklen_t len;
  sockaddr_un a = abstract_address(shm_identity().gid, &len);
  if (sys::bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 || sys::listen(fd, 256) != 0) {
    SMCR_LOG(1, "shm: cannot bind rendezvous socket: %s", strerror(errno));
    sys::close(fd);
    return -1;
  }
  listen_fd_ = fd;
  return fd;
}

uint32_t ShmRendezvous::expect(uint32_t rkey, uint64_t vaddr, int rmb_fd) {
  MutexLock lock(mu_);
  uint32_t qpn;
  do {
    uint64_t r = 0;
    if (!random_u64(&r)) return 0;
    qpn = static_cast<uint32_t>(r) & 0xFFFFFF;
  } while (qpn == 0 || pending_.count(qpn));
  Pending p;
  p.rkey = rkey;
  p.vaddr = vaddr;
  p.rmb_fd = rmb_fd;
  pending_[qpn] = p;
  return qpn;
}

bool ShmRendezvous::wait_arrival(uint32_t qpn, int64_t deadline_ms, Pending* out) {
  MutexLock lock(mu_);
  auto settled = [&]() SMCR_REQUIRES(mu_) {
    auto it = pending_.find(qpn);
    return it == pending_.end() || it->second.arrived;
  };
  int64_t left = deadline_ms - sys::now_ms();
  if (left > 0) mu_.wait_for(cv_, std::chrono::milliseconds(left), settled);
  auto it = pending_.find(qpn);
  if (it == pending_.end()) return false;
  bool arrived = it->second.arrived;
  if (arrived) *out = it->second;
  pending_.erase(it);  // arrived, or the deadline passed
  return arrived;
}

void ShmRendezvous::on_listener_readable(const std::function<void(int)>& watch_fd) {
  int listener;
  {
    MutexLock lock(mu_);  // a forked child's listener_fd() replaces it
    listener = listen_fd_;
  }
  for (;;) {
    int fd = sys::hide_fd(sys::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (fd < 0) return;
    watch_fd(fd);
  }
}

bool ShmRendezvous::on_hello_readable(int fd) {
  uint8_t buf[128];
  int client_rmb = -1;
  ssize_t n = sys::recv_with_fd(fd, buf, sizeof buf, &client_rmb);
  if (n < 0 && errno == EAGAIN) return false;
  WireReader r(std::span<const uint8_t>(buf, n > 0 ? static_cast<size_t>(n) : 0));
  uint64_t magic = r.be64();
  ShmHello h;
  h.server_qpn = r.be32();
  h.server_rkey = r.be32();
  h.server_vaddr = r.be64();
  h.client_qpn = r.be32();
  h.client_rkey = r.be32();
  h.client_vaddr = r.be64();
  h.client_rmb_size = r.be32();
  bool ok = n == static_cast<ssize_t>(kHelloLen) && r.ok() && magic == kHelloMagic && client_rmb >= 0;
  {
    MutexLock lock(mu_);
    auto it = ok ? pending_.find(h.server_qpn) : pending_.end();
    if (it != pending_.end() && !it->second.arrived && it->second.rkey == h.server_rkey &&
        it->second.vaddr == h.server_vaddr) {
      WireWriter w;
      w.be64(kHelloMagic);
      w.be32(0);
      if (send_with_fd(fd, w.buffer(), it->second.rmb_fd)) {
        // From here the fd is a link: blocking sends, bounded by a timeout.
        int fl = sys::fcntl(fd, F_GETFL);
        sys::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
        timeval tv{10, 0};
        sys::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        it->second.arrived = true;
        it->second.link_fd = fd;
        it->second.client_rmb_fd = client_rmb;
        it->second.hello = h;
        cv_.notify_all();
        return true;
      }
    }
  }
  SMCR_LOG(1, "shm: rejected a rendezvous hello (%zd bytes)", n);
  if (client_rmb >= 0) sys::close(client_rmb);
  sys::close(fd);
  return true;
}

}  // namespace smcr
