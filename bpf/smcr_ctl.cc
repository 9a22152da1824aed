// smcr_ctl - load, unload and inspect the SMC-R TCP option sockops program.
//
//   smcr_ctl load [--cgroup PATH]   load, attach to the cgroup (default: the
//                                   cgroup v2 root from /proc/mounts) and pin
//                                   link/prog/maps under the pin directory.
//                                   Idempotent: exits 0 if already loaded.
//   smcr_ctl unload                 unpin everything (this detaches).
//   smcr_ctl status                 exit 0 if loaded, 3 if not.
//
// Pin directory: $SMCR_BPF_PIN_DIR or /sys/fs/bpf/smcr. Modes: optin 0666
// (any user may opt in its own sockets), result 0444 (any user may read with
// BPF_F_RDONLY), offers 0666 but frozen (any user may map it, read-only in
// effect), link/prog/synack_fail/listeners 0600, the directory 0755.

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "smcr_abi.h"
#include "smcr_option.skel.h"

#ifndef BPF_FS_MAGIC
#define BPF_FS_MAGIC 0xcafe4a11
#endif

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFail = 1;
constexpr int kExitUsage = 2;
constexpr int kExitNotLoaded = 3;

struct PinEntry {
  const char* name;
  mode_t mode;
};
// Order matters for unload: the link first (detaches), then the rest.
constexpr PinEntry kPins[] = {
    {SMCR_PIN_LINK, 0600},   {SMCR_PIN_PROG, 0600},          {SMCR_PIN_OPTIN, 0666},
    {SMCR_PIN_RESULT, 0444}, {SMCR_PIN_FAIL, 0600}, {SMCR_PIN_LISTENERS, 0600},
    // Writable for the open only: mmap() refuses a shared mapping of a map
    // through a read-only descriptor (VM_SHARED goes with FMODE_WRITE), and
    // the map is frozen at load, so no process writes it but the program.
    {SMCR_PIN_OFFERS, 0666},
};

std::string pin_dir() {
  const char* e = getenv(SMCR_PIN_DIR_ENV);
  return (e && *e) ? std::string(e) : std::string(SMCR_PIN_DIR_DEFAULT);
}

std::string pin_path(const char* name) { return pin_dir() + "/" + name; }

void err(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("smcr_ctl: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

bool is_bpffs(const std::string& path) {
  struct statfs st {};
  return statfs(path.c_str(), &st) == 0 && static_cast<unsigned long>(st.f_type) == BPF_FS_MAGIC;
}

std::string parent_of(const std::string& p) {
  auto pos = p.find_last_of('/');
  if (pos == std::string::npos) return ".";
  if (pos == 0) return "/";
  return p.substr(0, pos);
}

bool ensure_bpffs() {
  if (!is_bpffs("/sys/fs/bpf")) {
    if (mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0755") != 0) {
      err("mount -t bpf bpf /sys/fs/bpf: %s", strerror(errno));
      return false;
    }
  }
  std::string parent = parent_of(pin_dir());
  if (!is_bpffs(parent)) {
    err("%s is not on a bpf filesystem", parent.c_str());
    return false;
  }
  return true;
}

std::string cgroup2_root() {
  std::ifstream in("/proc/mounts");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string dev, dir, type;
    ss >> dev >> dir >> type;
    if (type == "cgroup2") return dir;
  }
  return {};
}

// Link pinned and openable.
bool is_loaded(int* link_fd_out = nullptr) {
  int fd = bpf_obj_get(pin_path(SMCR_PIN_LINK).c_str());
  if (fd < 0) return false;
  if (link_fd_out)
    *link_fd_out = fd;
  else
    close(fd);
  return true;
}

void unpin_all(bool verbose) {
  for (const auto& p : kPins) {
    std::string path = pin_path(p.name);
    if (unlink(path.c_str()) != 0 && errno != ENOENT && verbose)
      err("unlink %s: %s", path.c_str(), strerror(errno));
  }
  if (rmdir(pin_dir().c_str()) != 0 && errno != ENOENT && verbose)
    err("rmdir %s: %s", pin_dir().c_str(), strerror(errno));
}

int libbpf_print(enum libbpf_print_level level, const char* fmt, va_list ap) {
  if (level == LIBBPF_DEBUG) return 0;
  return vfprintf(stderr, fmt, ap);
}

int cmd_load(const std::string& cgroup_arg) {
  if (!ensure_bpffs()) return kExitFail;
  if (is_loaded()) {
    printf("already loaded (%s)\n", pin_dir().c_str());
    // Loaded by an older smcr_ctl: it works, without what the missing pins
    // give (offers: accept() then reads every child's record).
    std::string missing;
    for (const auto& p : kPins) {
      struct stat st {};
      if (stat(pin_path(p.name).c_str(), &st) != 0) missing += std::string(missing.empty() ? "" : ", ") + p.name;
    }
    if (!missing.empty())
      err("loaded by an older smcr_ctl (no pin %s); to use this version: smcr_ctl unload && smcr_ctl load",
          missing.c_str());
    return kExitOk;
  }
  // Partial leftovers from an interrupted load: clear them.
  unpin_all(false);

  std::string cg = cgroup_arg.empty() ? cgroup2_root() : cgroup_arg;
  if (cg.empty()) {
    err("no cgroup2 mount found in /proc/mounts (use --cgroup PATH)");
    return kExitFail;
  }
  int cg_fd = open(cg.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (cg_fd < 0) {
    err("open cgroup %s: %s", cg.c_str(), strerror(errno));
    return kExitFail;
  }

  libbpf_set_print(libbpf_print);
  smcr_option_bpf* skel = smcr_option_bpf__open_and_load();
  if (!skel) {
    err("loading the BPF program failed: %s", strerror(errno));
    close(cg_fd);
    return kExitFail;
  }
  int rc = kExitFail;
  bpf_link* link = nullptr;
  std::string dir = pin_dir();
  do {
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      err("mkdir %s: %s", dir.c_str(), strerror(errno));
      break;
    }
    chmod(dir.c_str(), 0755);
    struct {
      bpf_map* map;
      const char* name;
    } maps[] = {{skel->maps.smcr_optin, SMCR_PIN_OPTIN},
                {skel->maps.smcr_result, SMCR_PIN_RESULT},
                {skel->maps.smcr_synack_fail, SMCR_PIN_FAIL},
                {skel->maps.smcr_listeners, SMCR_PIN_LISTENERS},
                {skel->maps.smcr_offers, SMCR_PIN_OFFERS}};
    bool ok = true;
    if (int e = bpf_map_freeze(bpf_map__fd(skel->maps.smcr_offers)); e) {
      err("freeze map %s: %s", SMCR_PIN_OFFERS, strerror(-e));
      break;
    }
    for (auto& m : maps) {
      int e = bpf_map__pin(m.map, pin_path(m.name).c_str());
      if (e) {
        err("pin map %s: %s", m.name, strerror(-e));
        ok = false;
        break;
      }
    }
    if (!ok) break;
    int e = bpf_program__pin(skel->progs.smcr_sockops, pin_path(SMCR_PIN_PROG).c_str());
    if (e) {
      err("pin program: %s", strerror(-e));
      break;
    }
    for (const auto& p : kPins) {
      if (strcmp(p.name, SMCR_PIN_LINK) == 0) continue;
      if (chmod(pin_path(p.name).c_str(), p.mode) != 0) {
        err("chmod %s: %s", pin_path(p.name).c_str(), strerror(errno));
        ok = false;
      }
    }
    if (!ok) break;
    // Attach last, once everything a shim needs is in place.
    link = bpf_program__attach_cgroup(skel->progs.smcr_sockops, cg_fd);
    if (!link) {
      err("attach to cgroup %s: %s", cg.c_str(), strerror(errno));
      break;
    }
    e = bpf_link__pin(link, pin_path(SMCR_PIN_LINK).c_str());
    if (e) {
      err("pin link: %s", strerror(-e));
      break;
    }
    chmod(pin_path(SMCR_PIN_LINK).c_str(), 0600);
    rc = kExitOk;
  } while (false);

  if (rc != kExitOk) unpin_all(false);
  if (link) bpf_link__destroy(link);  // the pin keeps it attached
  smcr_option_bpf__destroy(skel);
  close(cg_fd);
  if (rc == kExitOk) printf("loaded: cgroup %s, pins in %s\n", cg.c_str(), dir.c_str());
  return rc;
}

int cmd_unload() {
  bool was = is_loaded();
  struct stat st {};
  bool dir_exists = stat(pin_dir().c_str(), &st) == 0;
  unpin_all(true);
  if (stat(pin_dir().c_str(), &st) == 0) {
    err("%s still exists after unload", pin_dir().c_str());
    return kExitFail;
  }
  printf("%s\n", was ? "unloaded" : (dir_exists ? "removed stale pins" : "not loaded"));
  return kExitOk;
}

unsigned long long g_find_id;
std::string g_found;
int find_cb(const char* path, const struct stat* sb, int type, struct FTW*) {
  if (type == FTW_D && sb->st_ino == g_find_id) {
    g_found = path;
    return 1;
  }
  return 0;
}

unsigned map_id_of(const char* name) {
  LIBBPF_OPTS(bpf_obj_get_opts, o, .file_flags = BPF_F_RDONLY);
  int fd = bpf_obj_get_opts(pin_path(name).c_str(), &o);
  if (fd < 0) return 0;
  bpf_map_info info{};
  __u32 len = sizeof(info);
  unsigned id = bpf_obj_get_info_by_fd(fd, &info, &len) == 0 ? info.id : 0;
  close(fd);
  return id;
}

int cmd_status() {
  int link_fd = -1;
  if (!is_loaded(&link_fd)) {
    printf("not loaded (%s)\n", pin_dir().c_str());
    return kExitNotLoaded;
  }
  bpf_link_info info{};
  __u32 len = sizeof(info);
  if (bpf_obj_get_info_by_fd(link_fd, &info, &len) != 0) {
    err("link info: %s", strerror(errno));
    close(link_fd);
    return kExitFail;
  }
  close(link_fd);
  std::string cgpath = "?";
  if (info.type == BPF_LINK_TYPE_CGROUP) {
    std::string root = cgroup2_root();
    g_find_id = info.cgroup.cgroup_id;
    g_found.clear();
    if (!root.empty()) nftw(root.c_str(), find_cb, 16, FTW_PHYS | FTW_MOUNT);
    cgpath = g_found.empty() ? ("id " + std::to_string(info.cgroup.cgroup_id)) : g_found;
  }
  printf("loaded\n");
  printf("pin_dir: %s\n", pin_dir().c_str());
  printf("cgroup: %s\n", cgpath.c_str());
  printf("link_id: %u\nprog_id: %u\n", info.id, info.prog_id);
  printf("map optin: id %u\n", map_id_of(SMCR_PIN_OPTIN));
  printf("map result: id %u\n", map_id_of(SMCR_PIN_RESULT));
  printf("map synack_fail: id %u\n", map_id_of(SMCR_PIN_FAIL));
  printf("map listeners: id %u\n", map_id_of(SMCR_PIN_LISTENERS));
  return kExitOk;
}

void usage() {
  fprintf(stderr,
          "usage: smcr_ctl load [--cgroup PATH] | unload | status\n"
          "  pin directory: $" SMCR_PIN_DIR_ENV " (default " SMCR_PIN_DIR_DEFAULT ")\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage();
    return kExitUsage;
  }
  std::string cmd = argv[1];
  std::string cgroup;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--cgroup" && i + 1 < argc) {
      cgroup = argv[++i];
    } else if (a.rfind("--cgroup=", 0) == 0) {
      cgroup = a.substr(9);
    } else {
      usage();
      return kExitUsage;
    }
  }
  if (cmd == "load") return cmd_load(cgroup);
  if (!cgroup.empty()) {
    usage();
    return kExitUsage;
  }
  if (cmd == "unload") return cmd_unload();
  if (cmd == "status") return cmd_status();
  usage();
  return kExitUsage;
}
