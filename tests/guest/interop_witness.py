#!/usr/bin/env python3
"""The kernel as the witness of an interop run (tests/guest/interop_test.sh).

Reads the guest pair's log ("[A] RESULT ..." / "[B] RESULT ..." lines) and
prints one line per check:

    WITNESS <case> <check> ok=0|1 <detail>

Each check is read from the Linux kernel's own state, so that an SMC-R claim
cannot rest on our side's word (nor on a fallback):

  case0  kernel client (B) -> kernel server (A): the control
  case1  our client (B)    -> kernel server (A)
  case2  kernel client (B) -> our server (A)

  conns     smc_diag: every kernel-side connection in mode SMCR, fallback
            reason 0, peer diagnosis 0, its echo intact, in a process
            without the shim (no LD_PRELOAD, no smcr library mapped)
  cursors   smc_diag: the kernel's producer cursors account for every byte
            sent and received (Linux's RMBE model: cursors from 0)
  lgr       the kernel's link-group dump: SMC-Rv2, the negotiated UEID, and
            the peer hostname this run set on the other guest
  link      the kernel's link dump: the peer GID is the other guest's, and
            the peer link uid is the one the peer put in its CONFIRM LINK
  kstats    (per guest) the kernel's SMC-R statistics: one more v2 success
            per connection, RX/TX bytes at least the data
  rxe       (per guest) rxe's packet counters rose by at least the data's
            worth of 4 KiB packets
  tcp_only_clc  the kernel's TCP socket under each kernel-side AF_SMC
            connection (ss, read while it is up) carried fewer bytes each way
            than 1 KiB: the CLC messages (at most 196 + 180 bytes) and no data

usage: interop_witness.py LOG UEID BYTES BIG_BYTES
"""
import re
import sys


def main():
    log, ueid, small, big = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    lines = {"A": [], "B": []}
    for raw in open(log, errors="replace"):
        m = re.match(r"^\[([AB])\] RESULT (.*)$", raw.rstrip("\n"))
        if m:
            lines[m.group(1)].append(m.group(2))

    def grab(side, prefix):
        return [l[len(prefix):].strip() for l in lines[side] if l.startswith(prefix)]

    def kv(text):
        return dict(re.findall(r"(\w+)=(\S*)", text))

    def say(case, check, ok, detail):
        print(f"WITNESS {case} {check} ok={1 if ok else 0} {detail}")

    host = {s: (kv(" ".join(grab(s, "host "))).get("name", "?")) for s in "AB"}
    ip = {"A": (10, 9, 1, 1), "B": (10, 9, 1, 2)}

    def gid_tail(side):
        a, b, c, d = ip[side]
        return f"{a:02x}{b:02x}:{c:02x}{d:02x}"

    # Our side's link uid, from its debug log (the CONFIRM LINK it sent or received).
    def our_uid(side, case):
        for l in grab(side, f"{case} our_log "):
            m = re.search(r"LLC: CONFIRM LINK (?:reply sent|confirmed): link \d+, link uid ([0-9a-f]{8})", l)
            if m:
                return m.group(1)
        return None

    cases = {
        # case: (kernel side, its line prefix, peer side, kernel role)
        "case0": ("A", "case0 kernel_server", "B", "server"),
        "case1": ("A", "case1 kernel_server", "B", "server"),
        "case2": ("B", "case2 kernel_client", "A", "client"),
    }
    for case, (side, prefix, peer, role) in cases.items():
        conns = [kv(l) for l in grab(side, prefix + "_conn ")] if role == "server" else \
                [kv(l) for l in grab(side, prefix + " ") if "ok=" in l]
        want_sizes = sorted([small, big])
        ok = len(conns) == 2 and all(c.get("mode") == "SMCR" and c.get("fallback_reason") == "0x00000000" and
                                     c.get("peer_diagnosis") == "0x00000000" and c.get("ok") == "1" and
                                     c.get("shim") == "absent" for c in conns)
        say(case, "conns", ok, " | ".join(f"mode={c.get('mode')} reason={c.get('fallback_reason')} "
                                          f"peer_diag={c.get('peer_diagnosis')} ok={c.get('ok')} shim={c.get('shim')}"
                                          for c in conns) or "none")
        ok = len(conns) == 2 and sorted(int(c.get("sent", -1)) for c in conns) == want_sizes and all(
            c.get("tx_cursor_bytes") == c.get("sent") and c.get("rx_cursor_bytes") == c.get("received") for c in conns)
        say(case, "cursors", ok, " | ".join(f"sent={c.get('sent')} tx_cursor={c.get('tx_cursor_bytes', '-')} "
                                            f"received={c.get('received')} rx_cursor={c.get('rx_cursor_bytes', '-')}"
                                            for c in conns) or "none")
        dumps = grab(side, prefix + "_dump ")
        lgrs = [kv(l) for l in dumps if l.startswith("lgr ")]
        ok = any(g.get("role") == role and g.get("v2_ver") == "2" and g.get("neg_eid") == ueid and
                 g.get("peer_host") == host[peer] for g in lgrs)
        say(case, "lgr", ok, f"want role={role} v2 eid={ueid} peer_host={host[peer]}; kernel: " +
            (" | ".join(f"role={g.get('role')} v2_ver={g.get('v2_ver')} eid={g.get('neg_eid')} "
                        f"peer_host={g.get('peer_host')}" for g in lgrs) or "no link group"))
        # ss lines: a socket ("ss 0 0 LOCAL PEER"), then its TCP info.
        tcp, current = [], None
        for l in dumps:
            if not l.startswith("ss "):
                continue
            m = re.match(r"ss (?:[A-Z][A-Z0-9-]*\s+)?\d+\s+\d+\s+(\S+)\s+(\S+)", l)
            if m:
                current = {"sock": f"{m.group(1)}->{m.group(2)}"}
                tcp.append(current)
            elif current is not None:
                for k in ("bytes_sent", "bytes_received"):
                    v = re.search(k + r":(\d+)", l)
                    if v:
                        current[k] = int(v.group(1))
        port = {"case0": "5003", "case1": "5001", "case2": "5002"}[case]
        mine = [t for t in tcp if f":{port}" in t["sock"] and "bytes_received" in t]
        ok = len(mine) > 0 and all(0 < t.get("bytes_sent", 1 << 40) < 1024 and 0 < t.get("bytes_received", 1 << 40) < 1024
                                   for t in mine)
        say(case, "tcp_only_clc", ok, " | ".join(f"{t['sock']} bytes_sent={t.get('bytes_sent')} "
                                                 f"bytes_received={t.get('bytes_received')}" for t in mine)
            or "no TCP socket seen")
        links = [kv(l) for l in dumps if l.startswith("link ")]
        if case == "case0":
            # the other kernel's own uid for the link, from its dump
            other = [kv(l) for l in grab(peer, "case0 kernel_client_dump ") if l.startswith("link ")]
            want_uid = other[0].get("uid") if other else None
        else:
            want_uid = our_uid(peer, case)
        ok = want_uid is not None and any(l.get("peer_gid", "").endswith(gid_tail(peer)) and
                                          l.get("peer_uid") == want_uid for l in links)
        say(case, "link", ok, f"want peer_gid ...{gid_tail(peer)} peer_uid={want_uid}; kernel: " +
            (" | ".join(f"peer_gid={l.get('peer_gid')} peer_uid={l.get('peer_uid')}" for l in links) or "no link"))

    # Per guest: each kernel took part in two cases of two connections.
    total = 2 * (small + big)
    for side, succ in (("A", "srv_v2_succ"), ("B", "clnt_v2_succ")):
        before, after = kv(" ".join(grab(side, "kstats before "))), kv(" ".join(grab(side, "kstats after ")))
        d = {k: int(after.get(k, 0)) - int(before.get(k, 0)) for k in
             (succ, "rx_bytes", "tx_bytes", "sent_pkts", "rcvd_pkts")}
        say(f"guest{side}", "kstats", d[succ] >= 4 and d["rx_bytes"] >= total and d["tx_bytes"] >= total,
            f"{succ}+{d[succ]} (want >= 4) rx_bytes+{d['rx_bytes']} tx_bytes+{d['tx_bytes']} (want >= {total})")
        say(f"guest{side}", "rxe", d["sent_pkts"] >= total // 4096 and d["rcvd_pkts"] >= total // 4096,
            f"sent_pkts+{d['sent_pkts']} rcvd_pkts+{d['rcvd_pkts']} (want >= {total // 4096})")

    return 0


if __name__ == "__main__":
    sys.exit(main())
