// The verbs fabric's device side: the RDMA devices of this host (opened
// once, cached, rescanned when a local address finds no GID), their GID
// tables, the choice of a (device, port, GID) for a connection or a second
// link, a device's ECE values, port counters, and the device's async events.
// The links themselves (QPs, CQs, memory registrations) are fabric_verbs.cc's;
// the declarations of both are in fabric_verbs.h.
#include "core/verbs_device.h"
#include "core/fabric_verbs.h"
#include "core/verbs_loader.h"

#include <dirent.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/env.h"
#include "core/log.h"
#include "core/sys.h"

namespace smcr {

using verbs_internal::errstr;
using verbs_internal::gid_to_string;
using verbs_internal::set_why;

namespace {

// ---------------------------------------------------------------- helpers

// sysfs reads go through raw syscalls like the rest of core/: the engine lives
// inside the LD_PRELOAD library that exports read/close itself.
bool read_small_file(const std::string& path, std::string* out) {
  int fd = static_cast<int>(smcr::sys::raw_syscall(SYS_openat, AT_FDCWD, path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd < 0) return false;
  char buf[256];
  ssize_t n;
  do {
    n = sys::read(fd, buf, sizeof buf - 1);
  } while (n < 0 && errno == EINTR);
  sys::close(fd);
  if (n < 0) return false;
  buf[n] = '\0';
  out->assign(buf, static_cast<size_t>(n));
  while (!out->empty() && (out->back() == '\n' || out->back() == ' ')) out->pop_back();
  return true;
}

bool parse_u64(const std::string& s, uint64_t* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long x = strtoull(s.c_str(), &end, 10);
  if (errno != 0 || end == s.c_str() || *end != '\0') return false;
  *v = x;
  return true;
}

// "aa:bb:cc:dd:ee:ff" -> 6 bytes.
bool parse_mac(const std::string& s, clc::Mac* mac) {
  unsigned b[6];
  char tail;
  if (sscanf(s.c_str(), "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &tail) != 6)
    return false;
  for (int i = 0; i < 6; ++i) (*mac)[i] = static_cast<uint8_t>(b[i]);
  return true;
}

std::string addr_to_string(const sockaddr* sa) {
  char buf[64] = "?";
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    const auto* b = reinterpret_cast<const uint8_t*>(&in->sin_addr);
    snprintf(buf, sizeof buf, "%u.%u.%u.%u", b[0], b[1], b[2], b[3]);
  } else if (sa->sa_family == AF_INET6) {
    clc::Gid g;
    std::memcpy(g.data(), &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, 16);
    return gid_to_string(g);
  }
  return buf;
}

// The RoCE v2 GID that carries `sa`: ::ffff:a.b.c.d for IPv4, the address
// itself for IPv6 (a v4-mapped IPv6 address therefore maps to the same GID).
bool gid_for_address(const sockaddr* sa, clc::Gid* gid) {
  gid->fill(0);
  if (sa->sa_family == AF_INET) {
    (*gid)[10] = 0xff;
    (*gid)[11] = 0xff;
    std::memcpy(gid->data() + 12, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, 4);
    return true;
  }
  if (sa->sa_family == AF_INET6) {
    std::memcpy(gid->data(), &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, 16);
    return true;
  }
  return false;
}

std::optional<long> env_long(const char* name, long lo, long hi) {
  const char* v = env(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  long x = strtol(v, &end, 0);
  if (errno != 0 || *end != '\0' || x < lo || x > hi) {
    SMCR_LOG(1, "verbs: ignoring %s=%s (expected %ld..%ld)", name, v, lo, hi);
    return std::nullopt;
  }
  return x;
}

// ---------------------------------------------------------------- device cache

struct CachedDevice {
  std::string name;
  ibv_context* ctx = nullptr;
};

// Contexts are opened once per process and never closed: links and their
// memory registrations hang off them, and a context is cheap to keep.
struct DeviceCache {
  std::mutex mu;
  pid_t pid = 0;  // contexts inherited over fork() are not usable in the child
  std::vector<CachedDevice> devices;
  int64_t last_scan_ms = -1;
  std::string scan_error;
  // What a QP on each device reported for ECE (nullopt: unsupported).
  std::map<std::string, std::optional<VerbsEce>> ece;
};

DeviceCache& device_cache() {
  static DeviceCache* c = new DeviceCache();
  return *c;
}

// Opens devices not yet cached. Caller holds the cache mutex. Rescans are
// rate-limited because a host without RDMA would otherwise rescan on every
// connection.
void scan_devices_locked(DeviceCache& c, bool force) {
  pid_t pid = getpid();
  if (c.pid != pid) {
    // A forked child reopens its devices; the parent's contexts are left
    // alone (closing them here would tear down the parent's shared state).
    c.pid = pid;
    c.devices.clear();
    c.last_scan_ms = -1;
  }
  int64_t now = sys::now_ms();
  if (!force && c.last_scan_ms >= 0 && now - c.last_scan_ms < 1000) return;
  c.last_scan_ms = now;
  std::string no_library;
  if (!verbs_library_loaded(&no_library)) {
    c.scan_error = " (" + no_library + ")";
    return;
  }
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list) {
    // ENOSYS: the kernel has no RDMA support at all (no uverbs class).
    c.scan_error = errno == ENOSYS ? "" : " (ibv_get_device_list: " + errstr(errno) + ")";
    return;
  }
  c.scan_error.clear();
  for (int i = 0; i < n; ++i) {
    const char* name = ibv_get_device_name(list[i]);
    if (!name) continue;
    bool known = std::any_of(c.devices.begin(), c.devices.end(), [&](const CachedDevice& d) { return d.name == name; });
    if (known) continue;
    ibv_context* ctx = ibv_open_device(list[i]);
    if (!ctx) {
      SMCR_LOG(1, "verbs: cannot open %s: %s", name, strerror(errno));
      continue;
    }
    // The engine reads port and device events from it without blocking.
    int fl = sys::fcntl(ctx->async_fd, F_GETFL);
    if (fl >= 0) sys::fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
    c.devices.push_back({name, ctx});
  }
  ibv_free_device_list(list);
}

struct GidEntry {
  uint32_t index = 0;
  uint32_t port = 0;
  uint32_t type = 0;
  clc::Gid gid{};
};

std::string sysfs_port_dir(const std::string& dev, unsigned port) {
  return "/sys/class/infiniband/" + dev + "/ports/" + std::to_string(port);
}

// The whole GID table of a device: one ioctl with ibv_query_gid_table, else
// sysfs (kernels before 5.9 lack the ioctl).
std::vector<GidEntry> gid_table(ibv_context* ctx, const std::string& dev, const ibv_device_attr& dattr) {
  std::vector<GidEntry> out;
  size_t total = 0;
  std::vector<int> lens(dattr.phys_port_cnt + 1, 0);
  for (unsigned p = 1; p <= dattr.phys_port_cnt; ++p) {
    ibv_port_attr pa{};
    if (ibv_query_port(ctx, static_cast<uint8_t>(p), &pa) == 0) {
      lens[p] = pa.gid_tbl_len;
      total += static_cast<size_t>(pa.gid_tbl_len);
    }
  }
  if (total == 0) return out;
  std::vector<ibv_gid_entry> raw(total);
  ssize_t n = ibv_query_gid_table(ctx, raw.data(), raw.size(), 0);
  if (n >= 0) {
    for (ssize_t i = 0; i < n; ++i) {
      GidEntry e;
      e.index = raw[i].gid_index;
      e.port = raw[i].port_num;
      e.type = raw[i].gid_type;
      std::memcpy(e.gid.data(), raw[i].gid.raw, 16);
      out.push_back(e);
    }
    return out;
  }
  for (unsigned p = 1; p <= dattr.phys_port_cnt; ++p) {
    std::string dir = sysfs_port_dir(dev, p);
    for (int i = 0; i < lens[p]; ++i) {
      std::string type;
      if (!read_small_file(dir + "/gid_attrs/types/" + std::to_string(i), &type)) continue;
      ibv_gid g{};
      if (ibv_query_gid(ctx, static_cast<uint8_t>(p), i, &g) != 0) continue;
      GidEntry e;
      e.index = static_cast<uint32_t>(i);
      e.port = p;
      // sysfs says "RoCE v2", "IB/RoCE v1"
      e.type = type == "RoCE v2" ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
      std::memcpy(e.gid.data(), g.raw, 16);
      bool zero = std::all_of(e.gid.begin(), e.gid.end(), [](uint8_t b) { return b == 0; });
      if (!zero) out.push_back(e);
    }
  }
  return out;
}

// Fills netdev, MAC, MTU and the rest of `vp` for a chosen GID index.
bool complete_port(ibv_context* ctx, const std::string& dev, uint8_t port, int gid_index, VerbsPort* vp,
                   std::string* why) {
  ibv_port_attr pa{};
  if (ibv_query_port(ctx, port, &pa) != 0) {
    set_why(why, dev + ": ibv_query_port failed");
    return false;
  }
  ibv_gid_entry ge{};
  int rc = ibv_query_gid_ex(ctx, port, static_cast<uint32_t>(gid_index), &ge, 0);
  if (rc != 0) {
    set_why(why, dev + " port " + std::to_string(port) + ": no GID at index " + std::to_string(gid_index) + " (" +
                     errstr(rc) + ")");
    return false;
  }
  if (ge.gid_type != IBV_GID_TYPE_ROCE_V2)
    SMCR_LOG(1, "verbs: %s GID index %d is not RoCE v2 (type %u)", dev.c_str(), gid_index, ge.gid_type);
  vp->context = ctx;
  vp->port = port;
  vp->gid_index = gid_index;
  std::memcpy(vp->gid.data(), ge.gid.raw, 16);
  vp->active_mtu_code = static_cast<uint8_t>(pa.active_mtu);
  vp->device = dev;
  std::string dir = sysfs_port_dir(dev, port);
  std::string ndev;
  if (read_small_file(dir + "/gid_attrs/ndevs/" + std::to_string(gid_index), &ndev) && !ndev.empty()) vp->netdev = ndev;
  std::string mac;
  if (vp->netdev.empty() || !read_small_file("/sys/class/net/" + vp->netdev + "/address", &mac) ||
      !parse_mac(mac, &vp->mac)) {
    set_why(why, dev + " GID index " + std::to_string(gid_index) + ": cannot read the netdev's MAC");
    return false;
  }
  if (vp->active_mtu_code < 1 || vp->active_mtu_code > 5) {
    set_why(why, dev + ": unexpected active MTU " + std::to_string(vp->active_mtu_code));
    return false;
  }
  return true;
}

std::string sysfs_counter_path(const VerbsPort& p, const char* sub, const char* name) {
  return sysfs_port_dir(p.device, p.port) + "/" + sub + "/" + name;
}

}  // namespace

namespace verbs_internal {

std::string gid_to_string(const clc::Gid& g) {
  char buf[64];
  int n = 0;
  for (int i = 0; i < 16; i += 2) n += snprintf(buf + n, sizeof buf - n, "%s%02x%02x", i ? ":" : "", g[i], g[i + 1]);
  return std::string(buf, static_cast<size_t>(n));
}

// Called by each new link (VerbsLink::init): what its QP reported for ECE
// answers verbs_device_ece for the device from then on.
void note_device_ece(const std::string& device, const std::optional<VerbsEce>& ece) {
  DeviceCache& c = device_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.ece[device] = ece;
}

}  // namespace verbs_internal

// ==================================================================== discovery

uint8_t verbs_traffic_class() {
  static const uint8_t tc = [] {
    auto v = env_long("SMCR_TCLASS", 0, 255);
    return v ? static_cast<uint8_t>(*v) : kDefaultTrafficClass;
  }();
  return tc;
}

std::optional<VerbsPort> verbs_port_for_local_address(const sockaddr* local, std::string* why) {
  clc::Gid want;
  if (!local || !gid_for_address(local, &want)) {
    set_why(why, "local address is not IPv4/IPv6");
    return std::nullopt;
  }
  const char* only_dev = env("SMCR_IB_DEVICE");
  if (only_dev && !*only_dev) only_dev = nullptr;
  std::optional<long> env_index = env_long("SMCR_GID_INDEX", 0, 65535);

  DeviceCache& c = device_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  // One pass over the cached devices; `fatal` means a port was chosen but
  // could not be completed (no point rescanning).
  auto search = [&](bool* fatal) -> std::optional<VerbsPort> {
    *fatal = false;
    bool saw_device = false;
    std::string notes;
    for (const CachedDevice& d : c.devices) {
      if (only_dev && d.name != only_dev) continue;
      saw_device = true;
      ibv_device_attr dattr{};
      if (ibv_query_device(d.ctx, &dattr) != 0) continue;
      for (const GidEntry& e : gid_table(d.ctx, d.name, dattr)) {
        if (e.type != IBV_GID_TYPE_ROCE_V2 || e.gid != want) continue;
        ibv_port_attr pa{};
        if (ibv_query_port(d.ctx, static_cast<uint8_t>(e.port), &pa) != 0) continue;
        if (pa.link_layer != IBV_LINK_LAYER_ETHERNET) continue;
        if (pa.state != IBV_PORT_ACTIVE) {
          notes += " (" + d.name + " port " + std::to_string(e.port) + " has it but is not ACTIVE)";
          continue;
        }
        int index = env_index ? static_cast<int>(*env_index) : static_cast<int>(e.index);
        VerbsPort vp;
        if (!complete_port(d.ctx, d.name, static_cast<uint8_t>(e.port), index, &vp, why)) {
          *fatal = true;
          return std::nullopt;
        }
        vp.gid_index_from_env = env_index.has_value();
        if (vp.gid != want)
          SMCR_LOG(1, "verbs: SMCR_GID_INDEX=%d gives %s, not the GID of %s", index, gid_to_string(vp.gid).c_str(),
                   addr_to_string(local).c_str());
        return vp;
      }
    }
    if (only_dev && env_index && saw_device) {
      // The operator named both: trust them even if no GID matches the address.
      for (const CachedDevice& d : c.devices) {
        if (d.name != only_dev) continue;
        VerbsPort vp;
        if (!complete_port(d.ctx, d.name, 1, static_cast<int>(*env_index), &vp, why)) {
          *fatal = true;
          return std::nullopt;
        }
        vp.gid_index_from_env = true;
        return vp;
      }
    }
    if (c.devices.empty())
      set_why(why, "no RDMA device" + c.scan_error);
    else if (!saw_device)
      set_why(why, std::string("SMCR_IB_DEVICE=") + only_dev + " not found");
    else
      set_why(why, "no RoCE v2 GID for " + addr_to_string(local) + " on " +
                       (only_dev ? std::string(only_dev) : std::string("any device")) + notes);
    return std::nullopt;
  };
  bool first_scan = c.last_scan_ms < 0;
  scan_devices_locked(c, false);
  bool fatal = false;
  auto vp = search(&fatal);
  if (vp || fatal || first_scan) return vp;
  // A miss with a stale cache: a device may have appeared since (rate-limited).
  size_t before = c.devices.size();
  scan_devices_locked(c, false);
  if (c.devices.size() == before) return std::nullopt;
  return search(&fatal);
}

namespace {

bool gid_is_v4_mapped(const clc::Gid& g) {
  return std::all_of(g.begin(), g.begin() + 10, [](uint8_t b) { return b == 0; }) && g[10] == 0xff && g[11] == 0xff;
}

// The IPv4 netmask of the interface holding `addr` (network order), 0 if none.
uint32_t ipv4_netmask_of(uint32_t addr) {
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return 0;
  uint32_t mask = 0;
  for (ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || !i->ifa_netmask || i->ifa_addr->sa_family != AF_INET) continue;
    if (reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr != addr) continue;
    mask = reinterpret_cast<sockaddr_in*>(i->ifa_netmask)->sin_addr.s_addr;
    break;
  }
  freeifaddrs(ifs);
  return mask;
}

}  // namespace

std::optional<VerbsPort> verbs_alternate_port(const VerbsPort& current, const clc::Gid* near) {
  const char* only_dev = env("SMCR_IB_DEVICE");
  if (only_dev && *only_dev) return std::nullopt;  // the operator pinned one device
  DeviceCache& c = device_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  scan_devices_locked(c, false);
  std::optional<VerbsPort> first;
  for (const CachedDevice& d : c.devices) {
    if (d.name == current.device) continue;
    ibv_device_attr dattr{};
    if (ibv_query_device(d.ctx, &dattr) != 0) continue;
    for (const GidEntry& e : gid_table(d.ctx, d.name, dattr)) {
      // RoCE v2 with an IPv4 address: routable, and comparable with `near`.
      if (e.type != IBV_GID_TYPE_ROCE_V2 || !gid_is_v4_mapped(e.gid)) continue;
      ibv_port_attr pa{};
      if (ibv_query_port(d.ctx, static_cast<uint8_t>(e.port), &pa) != 0 || pa.state != IBV_PORT_ACTIVE ||
          pa.link_layer != IBV_LINK_LAYER_ETHERNET)
        continue;
      VerbsPort vp;
      std::string why;
      if (!complete_port(d.ctx, d.name, static_cast<uint8_t>(e.port), static_cast<int>(e.index), &vp, &why)) continue;
      if (near && gid_is_v4_mapped(*near)) {
        uint32_t mine, theirs;
        std::memcpy(&mine, e.gid.data() + 12, 4);
        std::memcpy(&theirs, near->data() + 12, 4);
        uint32_t mask = ipv4_netmask_of(mine);
        if (mask != 0 && (mine & mask) == (theirs & mask)) return vp;  // same subnet: the best choice
      }
      if (!first) first = vp;
    }
  }
  return first;
}

namespace {

// Reads a device's async events (the engine calls this when its fd is
// readable). Port errors and fatal device errors take the port's links
// down (RFC 4.6: their connections move to a surviving link); QP events
// show up as error completions on that link's queues as well.
std::vector<DeviceEvent> read_async_events(int fd) {
  std::vector<DeviceEvent> out;
  ibv_context* ctx = nullptr;
  std::string name;
  {
    DeviceCache& c = device_cache();
    std::lock_guard<std::mutex> lock(c.mu);
    for (const CachedDevice& d : c.devices)
      if (d.ctx->async_fd == fd) {
        ctx = d.ctx;
        name = d.name;
      }
  }
  if (!ctx) return out;
  ibv_async_event ev;
  while (ibv_get_async_event(ctx, &ev) == 0) {
    DeviceEvent e;
    e.device = name;
    e.what = ibv_event_type_str(ev.event_type);
    switch (ev.event_type) {
      case IBV_EVENT_PORT_ERR:
        e.port = ev.element.port_num;
        e.down = true;
        break;
      case IBV_EVENT_DEVICE_FATAL:
        e.port = 0;
        e.down = true;
        break;
      case IBV_EVENT_PORT_ACTIVE:
      case IBV_EVENT_GID_CHANGE:
      case IBV_EVENT_LID_CHANGE:
        e.port = ev.element.port_num;
        break;
      default:
        break;
    }
    ibv_ack_async_event(&ev);
    SMCR_LOG(1, "verbs: %s: async event %s (port %d)", name.c_str(), e.what.c_str(), e.port);
    out.push_back(e);
  }
  return out;
}

}  // namespace

int VerbsLink::device_event_fd() const { return port_.context ? port_.context->async_fd : -1; }

DeviceEventReader VerbsLink::device_event_reader() const { return &read_async_events; }

std::optional<VerbsEce> verbs_device_ece(const VerbsPort& port) {
  DeviceCache& c = device_cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.ece.find(port.device);
    if (it != c.ece.end()) return it->second;
  }
  // ECE is queried on a QP: a short-lived one answers for the device, once.
  std::string why;
  auto probe = VerbsLink::create(port, &why);
  if (!probe) return std::nullopt;
  return probe->ece_supported() ? std::optional<VerbsEce>(probe->ece()) : std::nullopt;
}

std::optional<uint64_t> verbs_port_counter(const VerbsPort& port, const char* name) {
  std::string s;
  uint64_t v = 0;
  for (const char* sub : {"counters", "hw_counters"}) {
    if (read_small_file(sysfs_counter_path(port, sub, name), &s) && parse_u64(s, &v)) return v;
  }
  // Some drivers expose hw_counters per device only.
  if (read_small_file("/sys/class/infiniband/" + port.device + "/hw_counters/" + name, &s) && parse_u64(s, &v))
    return v;
  return std::nullopt;
}

std::string verbs_port_counters(const VerbsPort& port) {
  static const char* const kNamed[] = {"port_xmit_data", "port_rcv_data",   "port_xmit_packets", "port_rcv_packets",
                                       "np_cnp_sent",    "rp_cnp_handled",  "out_of_sequence",   "packet_seq_err",
                                       "local_ack_timeout_err"};
  std::string out;
  std::vector<std::string> shown;
  for (const char* n : kNamed) {
    auto v = verbs_port_counter(port, n);
    out += n;
    out += v ? "=" + std::to_string(*v) : std::string("=not provided");
    out += '\n';
    shown.emplace_back(n);
  }
  for (const std::string& dir : {sysfs_port_dir(port.device, port.port) + "/hw_counters",
                                 "/sys/class/infiniband/" + port.device + "/hw_counters"}) {
    DIR* d = opendir(dir.c_str());
    if (!d) continue;
    std::vector<std::string> names;
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.' || strcmp(e->d_name, "lifespan") == 0) continue;
      names.emplace_back(e->d_name);
    }
    closedir(d);
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) {
      if (std::find(shown.begin(), shown.end(), n) != shown.end()) continue;
      std::string s;
      if (!read_small_file(dir + "/" + n, &s)) continue;
      out += n + "=" + s + "\n";
      shown.push_back(n);
    }
  }
  return out;
}

}  // namespace smcr
