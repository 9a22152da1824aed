// smcr_stat: what the shim is doing in every process that runs under
// smc_run (in the spirit of smc-tools' smcss): link groups, links (fabric,
// device, QP, counters), SMC-R connections (addresses, state, bytes, RMBs)
// and the fallback counters. Each process's engine answers on an abstract
// Unix socket "smcr-diag-<pid>"; only the same user or root gets an answer,
// and processes that do not answer (another user's, or gone) are skipped.
//
//   usage: smcr_stat [--pid PID] [--raw | --json | --prometheus] [--input FILE]
//     (default)     tables: connections, link groups and links, fallbacks
//     --raw         the engines' own line-based key=value reports, unchanged
//     --json        one JSON document {"processes":[{"pid","comm","groups":
//                   [{..., "links":[...], "connections":[...]}],"counters"}]}
//     --prometheus  Prometheus text exposition format 0.0.4
//     --pid PID     only that process
//     --input FILE  format reports saved with --raw ("-": stdin) instead of
//                   asking the live processes
//   JSON: integer values are numbers, identifiers (token, peer_id, GIDs)
//   always strings; the group line's counts links= and connections= become
//   link_count and connection_count; a link's second state= (the fabric's)
//   is fabric_state, and a verbs device's counters are in "hw".
//   Prometheus: smcr_connections{pid,comm,state},
//   smcr_connection_{tx,rx}_bytes_total{pid,comm,local,peer},
//   smcr_link_up{pid,comm,role,peer_id,link,qpn,fabric,device},
//   smcr_fallback_total{pid,comm,reason}, smcr_<counter>_total{pid,comm}.
//   Exit status: 0 when at least one process answered, 1 when none did (the
//   --json and --prometheus documents are still printed, empty), 2 on bad usage.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

// ============================================================ collecting

// One process's report as its engine sent it.
struct RawReport {
  int pid;
  std::string text;
};

std::set<int> diag_pids() {
  std::set<int> pids;
  std::ifstream in("/proc/net/unix");
  std::string line;
  const std::string tag = "@smcr-diag-";
  while (std::getline(in, line)) {
    size_t at = line.find(tag);
    if (at != std::string::npos) pids.insert(atoi(line.c_str() + at + tag.size()));
  }
  return pids;
}

bool query(int pid, std::string* out) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "smcr-diag-%d", pid);
  // A process that does not answer (stopped, or its engine stuck) costs at
  // most this: the read's timeout, and the connect's when its listener's
  // backlog is full (an AF_UNIX connect waits for the send timeout).
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n)) != 0) {
    close(fd);
    return false;
  }
  // A request line first: without one the engine waits briefly for one.
  static const char kReport[] = "report\n";
  if (write(fd, kReport, sizeof kReport - 1) < 0) {
    close(fd);
    return false;
  }
  char buf[65536];
  for (;;) {
    ssize_t k = read(fd, buf, sizeof buf);
    if (k <= 0) break;
    out->append(buf, static_cast<size_t>(k));
  }
  close(fd);
  return !out->empty();
}

// only_pid 0: every process that answers.
std::vector<RawReport> collect_live(int only_pid) {
  std::vector<RawReport> reports;
  for (int pid : diag_pids()) {
    if (only_pid && pid != only_pid) continue;
    RawReport r{pid, {}};
    if (query(pid, &r.text)) reports.push_back(std::move(r));
  }
  return reports;
}

// Splits saved --raw output (one or more processes) back into reports.
std::vector<RawReport> split_saved(std::istream& in, int only_pid) {
  std::vector<RawReport> reports;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("process ", 0) == 0) {
      size_t at = line.find(" pid=");
      reports.push_back({at == std::string::npos ? 0 : atoi(line.c_str() + at + 5), {}});
    }
    if (!reports.empty()) reports.back().text += line + "\n";
  }
  if (only_pid) std::erase_if(reports, [&](const RawReport& r) { return r.pid != only_pid; });
  return reports;
}

// ============================================================ parsing

// key=value pairs in the order the engine wrote them.
using Fields = std::vector<std::pair<std::string, std::string>>;

const std::string* find_field(const Fields& fields, std::string_view key) {
  for (const auto& [k, v] : fields)
    if (k == key) return &v;
  return nullptr;
}

std::string field_or(const Fields& fields, std::string_view key, const char* missing = "-") {
  const std::string* v = find_field(fields, key);
  return v && !v->empty() ? *v : missing;
}

std::vector<std::string_view> split_words(std::string_view text) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && text[i] == ' ') ++i;
    size_t start = i;
    while (i < text.size() && text[i] != ' ') ++i;
    if (i > start) words.push_back(text.substr(start, i - start));
  }
  return words;
}

// A link line is the group's view of the link followed by the fabric's own
// describe() text, and both say state=. The first one (the group's) is the
// link's state; a repeated key is kept as duplicate_prefix + key when a
// prefix is given (so the fabric's verdict is not lost), dropped otherwise.
Fields parse_fields(std::string_view text, std::string_view duplicate_prefix = {}) {
  Fields fields;
  for (std::string_view word : split_words(text)) {
    size_t eq = word.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    std::string key(word.substr(0, eq));
    if (find_field(fields, key)) {
      if (duplicate_prefix.empty()) continue;
      key = std::string(duplicate_prefix) + key;
      if (find_field(fields, key)) continue;
    }
    fields.emplace_back(std::move(key), std::string(word.substr(eq + 1)));
  }
  return fields;
}

struct LinkInfo {
  Fields fields;
  Fields hw_counters;  // the verbs device's counters (after " hw: "), if any
};

struct GroupInfo {
  Fields fields;
  std::vector<LinkInfo> links;
  std::vector<Fields> connections;

  const LinkInfo* link_numbered(const std::string& num) const {
    for (const LinkInfo& l : links)
      if (field_or(l.fields, "num", "") == num) return &l;
    return nullptr;
  }
};

struct ProcessInfo {
  int pid = 0;
  std::string comm;
  std::vector<GroupInfo> groups;
  Fields counters;  // "name value" pairs, in the engine's order
};

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// Lines this version does not know are skipped, so that an older smcr_stat
// still reads a newer engine's report.
ProcessInfo parse_report(const RawReport& raw) {
  ProcessInfo p;
  p.pid = raw.pid;
  std::string_view text = raw.text;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (starts_with(line, "process ")) {
      // comm is last and may contain spaces: it is the rest of the line.
      size_t at = line.find(" comm=");
      if (at != std::string_view::npos) {
        p.comm = std::string(line.substr(at + 6));
        line = line.substr(0, at);
      }
      Fields process = parse_fields(line);
      if (const std::string* pid = find_field(process, "pid")) p.pid = atoi(pid->c_str());
    } else if (starts_with(line, "group ")) {
      p.groups.push_back({parse_fields(line.substr(6)), {}, {}});
    } else if (starts_with(line, "  link ") && !p.groups.empty()) {
      std::string_view body = line.substr(7);
      LinkInfo link;
      size_t hw = body.find(" hw: ");
      if (hw != std::string_view::npos) {
        link.hw_counters = parse_fields(body.substr(hw + 5));
        body = body.substr(0, hw);
      }
      link.fields = parse_fields(body, "fabric_");
      p.groups.back().links.push_back(std::move(link));
    } else if (starts_with(line, "  conn ") && !p.groups.empty()) {
      p.groups.back().connections.push_back(parse_fields(line.substr(7)));
    } else if (starts_with(line, "counters ")) {
      std::vector<std::string_view> words = split_words(line.substr(9));
      for (size_t i = 0; i + 1 < words.size(); i += 2) p.counters.emplace_back(words[i], words[i + 1]);
    }
  }
  return p;
}

bool is_unsigned_integer(std::string_view v) {
  return !v.empty() && v.size() <= 20 && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
}

uint64_t to_u64(std::string_view v) { return is_unsigned_integer(v) ? strtoull(std::string(v).c_str(), nullptr, 10) : 0; }

// "shm", or "verbs" with the device and port the link runs on.
std::string link_device(const LinkInfo& link) {
  std::string device = field_or(link.fields, "device", "");
  if (device.empty()) return "-";
  std::string port = field_or(link.fields, "port", "");
  return port.empty() ? device : device + ":" + port;
}

// ============================================================ tables

class Table {
 public:
  // right_aligned: one flag per column (numbers read best right-aligned).
  Table(std::vector<std::string> header, std::vector<bool> right_aligned)
      : right_aligned_(std::move(right_aligned)) {
    rows_.push_back(std::move(header));
    right_aligned_.resize(rows_[0].size(), false);
  }
  void add(std::vector<std::string> row) {
    row.resize(rows_[0].size(), "-");
    rows_.push_back(std::move(row));
  }
  void print(const std::string& indent = "") const {
    std::vector<size_t> width(rows_[0].size(), 0);
    for (const auto& row : rows_)
      for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    for (const auto& row : rows_) {
      std::string line = indent;
      for (size_t c = 0; c < row.size(); ++c) {
        std::string pad(width[c] - row[c].size(), ' ');
        if (c) line += "  ";
        line += right_aligned_[c] ? pad + row[c] : row[c] + (c + 1 < row.size() ? pad : "");
      }
      puts(line.c_str());
    }
  }

 private:
  std::vector<std::vector<std::string>> rows_;
  std::vector<bool> right_aligned_;
};

void print_tables(const std::vector<ProcessInfo>& processes) {
  Table conns({"PID", "COMM", "LOCAL", "PEER", "FABRIC", "STATE", "TX", "RX", "RMB", "LINK"},
              {true, false, false, false, false, false, true, true, true, false});
  Table links({"PID", "ROLE", "PEER_ID", "GROUP", "LINK", "STATE", "FABRIC", "DEVICE", "CONNS"},
              {true, false, false, false, false, false, false, false, true});
  for (const ProcessInfo& p : processes) {
    std::string pid = std::to_string(p.pid);
    for (const GroupInfo& g : p.groups) {
      for (const Fields& c : g.connections) {
        const LinkInfo* link = g.link_numbered(field_or(c, "link", ""));
        conns.add({pid, p.comm, field_or(c, "local"), field_or(c, "peer"),
                   link ? field_or(link->fields, "fabric") : "-", field_or(c, "state"), field_or(c, "tx_bytes"),
                   field_or(c, "rx_bytes"), field_or(c, "rmb"), field_or(c, "link")});
      }
      std::string role = field_or(g.fields, "role"), peer_id = field_or(g.fields, "peer_id");
      std::string group_state = field_or(g.fields, "state");
      if (g.links.empty()) links.add({pid, role, peer_id, group_state});
      for (const LinkInfo& l : g.links) {
        std::string num = field_or(l.fields, "num");
        long on_link = std::count_if(g.connections.begin(), g.connections.end(),
                                     [&](const Fields& c) { return field_or(c, "link") == num; });
        links.add({pid, role, peer_id, group_state, num, field_or(l.fields, "state"), field_or(l.fields, "fabric"),
                   link_device(l), std::to_string(on_link)});
      }
    }
  }
  conns.print();
  puts("");
  puts("Link groups and links:");
  links.print();

  // Summed over processes, in the engines' order.
  std::vector<std::pair<std::string, uint64_t>> fallbacks;
  uint64_t smc_active = 0, smc_passive = 0, fallback_total = 0;
  for (const ProcessInfo& p : processes) {
    for (const auto& [name, value] : p.counters) {
      uint64_t n = to_u64(value);
      if (name == "smc_active") smc_active += n;
      if (name == "smc_passive") smc_passive += n;
      if (name == "fallback_total") fallback_total += n;
      if (!starts_with(name, "fallback.")) continue;
      std::string reason = name.substr(9);
      auto it = std::find_if(fallbacks.begin(), fallbacks.end(), [&](const auto& f) { return f.first == reason; });
      if (it == fallbacks.end()) fallbacks.emplace_back(reason, n);
      else it->second += n;
    }
  }
  printf("\nTotals: smc_active %llu  smc_passive %llu  fallback_total %llu\n",
         static_cast<unsigned long long>(smc_active), static_cast<unsigned long long>(smc_passive),
         static_cast<unsigned long long>(fallback_total));
  std::erase_if(fallbacks, [](const auto& f) { return f.second == 0; });
  if (fallbacks.empty()) {
    puts("Fallbacks to TCP by reason: none");
    return;
  }
  puts("Fallbacks to TCP by reason:");
  Table by_reason({"REASON", "COUNT"}, {false, true});
  for (const auto& [reason, n] : fallbacks) by_reason.add({reason, std::to_string(n)});
  by_reason.print("  ");
}

// ============================================================ text encoding

// comm and addresses come from other processes: comm can hold any bytes, and
// both JSON and the Prometheus format require UTF-8. Invalid sequences become
// U+FFFD.
std::string valid_utf8(std::string_view s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    unsigned char b = byte(i);
    size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xe ? 3 : (b >> 3) == 0x1e ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) ok = (byte(i + k) & 0xc0) == 0x80;
    if (ok && len > 1) {
      // Reject overlong forms, surrogates and code points past U+10FFFF.
      uint32_t cp = b & (0xff >> (len + 1));
      for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (byte(i + k) & 0x3f);
      static const uint32_t kMinimum[] = {0, 0, 0x80, 0x800, 0x10000};
      ok = cp >= kMinimum[len] && cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff);
    }
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\xef\xbf\xbd";
      ++i;
    }
  }
  return out;
}

// ============================================================ JSON

std::string json_string(std::string_view raw) {
  std::string out = "\"";
  for (char ch : valid_utf8(raw)) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) {
          char esc[8];
          snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(ch));
          out += esc;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

// Identifiers stay strings even when they happen to be all digits (a hex
// token like "12345678"), so that their JSON type never changes between runs.
const std::set<std::string, std::less<>> kIdentifierKeys = {"token", "peer_id", "local_gid", "remote_gid",
                                                            "device", "netdev"};

std::string json_value(std::string_view key, std::string_view value) {
  bool number = is_unsigned_integer(value) && (value == "0" || value[0] != '0') && !kIdentifierKeys.contains(key);
  return number ? std::string(value) : json_string(value);
}

// The members of an object (without braces). renamed maps a key to the name
// it gets in JSON, where it would clash with a nested array.
std::string json_members(const Fields& fields, const std::map<std::string, std::string, std::less<>>& renamed = {}) {
  std::string out;
  for (const auto& [key, value] : fields) {
    auto it = renamed.find(key);
    const std::string& name = it == renamed.end() ? key : it->second;
    if (!out.empty()) out += ",";
    out += json_string(name) + ":" + json_value(key, value);
  }
  return out;
}

void print_json(const std::vector<ProcessInfo>& processes) {
  std::string out = "{\"processes\":[";
  for (size_t pi = 0; pi < processes.size(); ++pi) {
    const ProcessInfo& p = processes[pi];
    if (pi) out += ",";
    out += "{\"pid\":" + std::to_string(p.pid) + ",\"comm\":" + json_string(p.comm) + ",\"groups\":[";
    for (size_t gi = 0; gi < p.groups.size(); ++gi) {
      const GroupInfo& g = p.groups[gi];
      if (gi) out += ",";
      // The group line's counts "links" and "connections" would clash with
      // the arrays of the same name.
      std::string members = json_members(g.fields, {{"links", "link_count"}, {"connections", "connection_count"}});
      out += "{" + members + (members.empty() ? "" : ",") + "\"links\":[";
      for (size_t li = 0; li < g.links.size(); ++li) {
        const LinkInfo& l = g.links[li];
        if (li) out += ",";
        std::string link = json_members(l.fields);
        if (!l.hw_counters.empty()) link += (link.empty() ? "" : ",") + std::string("\"hw\":{") + json_members(l.hw_counters) + "}";
        out += "{" + link + "}";
      }
      out += "],\"connections\":[";
      for (size_t ci = 0; ci < g.connections.size(); ++ci) out += (ci ? ",{" : "{") + json_members(g.connections[ci]) + "}";
      out += "]}";
    }
    out += "],\"counters\":{" + json_members(p.counters) + "}}";
  }
  out += "]}\n";
  fputs(out.c_str(), stdout);
}

// ============================================================ Prometheus

std::string prometheus_label_value(std::string_view raw) {
  std::string out;
  for (char ch : valid_utf8(raw)) {
    if (ch == '\\') out += "\\\\";
    else if (ch == '"') out += "\\\"";
    else if (ch == '\n') out += "\\n";
    else out += ch;
  }
  return out;
}

std::string prometheus_name(std::string_view raw) {
  std::string out(raw);
  for (char& ch : out)
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_')) ch = '_';
  return out;
}

using Labels = std::vector<std::pair<std::string, std::string>>;

// The exposition format wants each metric family's samples together under
// one HELP and TYPE, so samples are gathered per family and printed at the end.
class Exposition {
 public:
  void add(const std::string& name, const char* type, const std::string& help, const Labels& labels,
           std::string_view value) {
    if (!is_unsigned_integer(value)) return;
    auto [it, fresh] = index_.try_emplace(name, families_.size());
    if (fresh) families_.push_back({name, type, help, {}});
    std::string sample = name + "{";
    for (size_t i = 0; i < labels.size(); ++i)
      sample += (i ? "," : "") + labels[i].first + "=\"" + prometheus_label_value(labels[i].second) + "\"";
    families_[it->second].samples.push_back(sample + "} " + std::string(value));
  }
  void print() const {
    for (const Family& f : families_) {
      printf("# HELP %s %s\n# TYPE %s %s\n", f.name.c_str(), f.help.c_str(), f.name.c_str(), f.type.c_str());
      for (const std::string& s : f.samples) puts(s.c_str());
    }
  }

 private:
  struct Family {
    std::string name, type, help;
    std::vector<std::string> samples;
  };
  std::vector<Family> families_;
  std::map<std::string, size_t> index_;
};

void print_prometheus(const std::vector<ProcessInfo>& processes) {
  Exposition metrics;
  for (const ProcessInfo& p : processes) {
    const std::string pid = std::to_string(p.pid);
    std::map<std::string, uint64_t> connections_by_state;
    for (const GroupInfo& g : p.groups) {
      for (const Fields& c : g.connections) {
        ++connections_by_state[field_or(c, "state")];
        Labels conn = {{"pid", pid}, {"comm", p.comm}, {"local", field_or(c, "local")}, {"peer", field_or(c, "peer")}};
        metrics.add("smcr_connection_tx_bytes_total", "counter", "Bytes the application sent on the SMC-R connection.",
                    conn, field_or(c, "tx_bytes", ""));
        metrics.add("smcr_connection_rx_bytes_total", "counter",
                    "Bytes the application received on the SMC-R connection.", conn, field_or(c, "rx_bytes", ""));
      }
      for (const LinkInfo& l : g.links) {
        // Two groups of one process can both have a link 1 (and even the
        // same peer), so the local QP number keeps each link's series apart.
        std::string device = field_or(l.fields, "device", "");
        Labels link = {{"pid", pid},
                       {"comm", p.comm},
                       {"role", field_or(g.fields, "role")},
                       {"peer_id", field_or(g.fields, "peer_id")},
                       {"link", field_or(l.fields, "num")},
                       {"qpn", field_or(l.fields, "local_qpn")},
                       {"fabric", field_or(l.fields, "fabric")},
                       {"device", device}};
        metrics.add("smcr_link_up", "gauge", "1 when the link group counts the link as up, 0 when not.", link,
                    field_or(l.fields, "state") == "up" ? "1" : "0");
      }
    }
    for (const auto& [state, n] : connections_by_state)
      metrics.add("smcr_connections", "gauge", "Live SMC-R connections by state.",
                  {{"pid", pid}, {"comm", p.comm}, {"state", state}}, std::to_string(n));
    for (const auto& [name, value] : p.counters) {
      Labels process = {{"pid", pid}, {"comm", p.comm}};
      if (starts_with(name, "fallback.")) {
        process.emplace_back("reason", name.substr(9));
        metrics.add("smcr_fallback_total", "counter", "Connections that fell back to plain TCP, by reason.", process,
                    value);
      } else if (name == "fallback_total") {
        // It is the sum over reasons: smcr_fallback_total already carries it,
        // and the same name without a reason would clash with that family.
        continue;
      } else if (starts_with(name, "last_")) {
        // The most recent value of something (an errno), not a count.
        metrics.add("smcr_" + prometheus_name(name), "gauge", "Shim value " + prometheus_name(name) + ".", process,
                    value);
      } else {
        std::string metric = "smcr_" + prometheus_name(name);
        if (!metric.ends_with("_total")) metric += "_total";
        metrics.add(metric, "counter", "Shim counter " + prometheus_name(name) + " of the process.", process, value);
      }
    }
  }
  metrics.print();
}

// ============================================================ main

void usage(FILE* to) {
  fputs("usage: smcr_stat [--pid PID] [--raw | --json | --prometheus] [--input FILE]\n"
        "  (default)     tables of SMC-R connections, link groups and links, and fallbacks\n"
        "  --raw         the engines' raw key=value reports\n"
        "  --json        one JSON document\n"
        "  --prometheus  Prometheus text exposition format 0.0.4\n"
        "  --pid PID     only that process\n"
        "  --input FILE  format reports saved with --raw (- for stdin) instead of asking live processes\n",
        to);
}

}  // namespace

int main(int argc, char** argv) {
  enum class Format { kTable, kRaw, kJson, kPrometheus };
  Format format = Format::kTable;
  bool format_given = false;
  int only_pid = 0;
  const char* input = nullptr;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    Format chosen = Format::kTable;
    if (arg == "--pid" && i + 1 < argc) {
      char* end = nullptr;
      long pid = strtol(argv[++i], &end, 10);
      if (*argv[i] == '\0' || *end != '\0' || pid <= 0 || pid > INT32_MAX) {
        usage(stderr);
        return 2;
      }
      only_pid = static_cast<int>(pid);
      continue;
    } else if (arg == "--input" && i + 1 < argc) {
      input = argv[++i];
      continue;
    } else if (arg == "-h" || arg == "--help") {
      usage(stdout);
      return 0;
    } else if (arg == "--raw") {
      chosen = Format::kRaw;
    } else if (arg == "--json") {
      chosen = Format::kJson;
    } else if (arg == "--prometheus") {
      chosen = Format::kPrometheus;
    } else {
      usage(stderr);
      return 2;
    }
    if (format_given && chosen != format) {  // one output format at a time
      usage(stderr);
      return 2;
    }
    format = chosen;
    format_given = true;
  }

  std::vector<RawReport> reports;
  if (!input) {
    reports = collect_live(only_pid);
  } else if (!strcmp(input, "-")) {
    reports = split_saved(std::cin, only_pid);
  } else {
    std::ifstream file(input);
    if (!file) {
      fprintf(stderr, "smcr_stat: cannot read %s: %s\n", input, strerror(errno));
      return 1;
    }
    reports = split_saved(file, only_pid);
  }

  if (format == Format::kRaw) {
    for (const RawReport& r : reports) fputs(r.text.c_str(), stdout);
  } else {
    std::vector<ProcessInfo> processes;
    for (const RawReport& r : reports) processes.push_back(parse_report(r));
    if (format == Format::kJson) print_json(processes);
    if (format == Format::kPrometheus) print_prometheus(processes);
    if (format == Format::kTable && !processes.empty()) print_tables(processes);
  }
  if (reports.empty()) {
    if (only_pid)
      fprintf(stderr, "smcr_stat: pid %d did not answer (not under smc_run, another user's process, or it exited)\n",
              only_pid);
    else
      fprintf(stderr, "smcr_stat: no process under smc_run with an active SMC-R engine answered\n");
    return 1;
  }
  return 0;
}
