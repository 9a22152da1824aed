#!/usr/bin/env python3
"""Configure the Linux kernel's SMC (net/smc) over generic netlink, for guests
without smc-tools (Debian 12 has none). Needs root and `modprobe smc`.

  smc_pnet.py pnet-add PNETID [--eth NETDEV] [--ib IBDEV [--port N]]
                                   like `smc_pnet -a -I IBDEV -P N -n NETDEV PNETID`
  smc_pnet.py pnet-flush           remove every pnet table entry
  smc_pnet.py ueid-add UEID        like `smcr ueid add UEID` (enables SMC-Rv2)
  smc_pnet.py ueid-flush
  smc_pnet.py fback-stats          print the kernel's SMC fallback counters (code count)
  smc_pnet.py lgr-dump             print the kernel's SMC-R link groups and links: role,
                                   connections, SMC-Rv2 release/OS/negotiated UEID/peer
                                   hostname; each link's GID, peer GID, link uid, peer uid
  smc_pnet.py stats                print the kernel's SMC-R statistics (v1/v2 successes,
                                   RX/TX bytes and counts)

Constants: Linux include/uapi/linux/smc.h ("SMC_PNETID" and "SMC_GEN_NETLINK"
families). Exit status 0 on success, 1 on a kernel error (printed), 3 when the
family is not registered (smc not loaded).
"""
import errno
import os
import socket
import struct
import sys

NETLINK_GENERIC = 16
GENL_ID_CTRL = 0x10
CTRL_CMD_GETFAMILY = 3
CTRL_ATTR_FAMILY_ID = 1
CTRL_ATTR_FAMILY_NAME = 2
NLM_F_REQUEST, NLM_F_ACK, NLM_F_DUMP = 0x1, 0x4, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
NLA_F_NESTED = 0x8000

# "SMC_PNETID" family (SMCR_GENL_FAMILY_NAME), version 1
SMC_PNETID_ADD, SMC_PNETID_FLUSH = 2, 4
SMC_PNETID_NAME, SMC_PNETID_ETHNAME, SMC_PNETID_IBNAME, SMC_PNETID_IBPORT = 1, 2, 3, 4
# "SMC_GEN_NETLINK" family (SMC_GENL_FAMILY_NAME), version 1
SMC_NETLINK_GET_FBACK_STATS = 8
SMC_NETLINK_ADD_UEID, SMC_NETLINK_FLUSH_UEID = 10, 12
SMC_NLA_EID_TABLE_ENTRY = 1
SMC_MAX_EID_LEN = 32
SMC_GEN_FBACK_STATS = 8
SMC_NLA_FBACK_STATS_TYPE, SMC_NLA_FBACK_STATS_SRV_CNT = 1, 2
SMC_NLA_FBACK_STATS_CLNT_CNT, SMC_NLA_FBACK_STATS_RSN_CODE, SMC_NLA_FBACK_STATS_RSN_CNT = 3, 4, 5
# link groups and links (include/uapi/linux/smc.h)
SMC_NETLINK_GET_LGR_SMCR, SMC_NETLINK_GET_LINK_SMCR, SMC_NETLINK_GET_STATS = 2, 3, 7
SMC_GEN_LGR_SMCR, SMC_GEN_LINK_SMCR, SMC_GEN_STATS = 2, 3, 7
LGR_ID, LGR_ROLE, LGR_TYPE, LGR_CONNS_NUM, LGR_V2_COMMON, LGR_V2 = 1, 2, 3, 6, 7, 8
V2_VER, V2_REL, V2_OS, V2_NEG_EID, V2_PEER_HOST = 0, 1, 2, 3, 4
LINK_ID, LINK_IB_DEV, LINK_GID, LINK_PEER_GID, LINK_CONN_CNT, LINK_UID, LINK_PEER_UID, LINK_STATE = 1, 2, 4, 5, 6, 8, 9, 10
STATS_SMCR_TECH = 2
STATS_T = {7: "clnt_v1_succ", 8: "clnt_v2_succ", 9: "srv_v1_succ", 10: "srv_v2_succ", 16: "rx_bytes", 17: "tx_bytes",
           18: "rx_cnt", 19: "tx_cnt"}


class NlError(Exception):
    pass


def attr(typ, data):
    n = 4 + len(data)
    return struct.pack("=HH", n, typ) + data + b"\0" * ((4 - n % 4) % 4)


def attrs_parse(buf):
    out = []
    off = 0
    while off + 4 <= len(buf):
        n, typ = struct.unpack_from("=HH", buf, off)
        if n < 4:
            break
        out.append((typ & 0x3FFF, buf[off + 4:off + n]))
        off += (n + 3) & ~3
    return out


class Genl:
    def __init__(self):
        self.s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_GENERIC)
        self.s.settimeout(5)
        self.s.bind((0, 0))
        self.seq = 0

    def request(self, family, cmd, payload=b"", version=1, dump=False):
        """Sends one genl request; returns the list of reply payloads (after genlmsghdr)."""
        self.seq += 1
        flags = NLM_F_REQUEST | (NLM_F_DUMP if dump else NLM_F_ACK)
        body = struct.pack("=BBH", cmd, version, 0) + payload
        self.s.send(struct.pack("=IHHII", 16 + len(body), family, flags, self.seq, 0) + body)
        replies = []
        while True:
            data = self.s.recv(65536)
            off = 0
            while off + 16 <= len(data):
                ln, typ, _fl, seq, _pid = struct.unpack_from("=IHHII", data, off)
                msg = data[off + 16:off + ln]
                off += (ln + 3) & ~3
                if seq != self.seq:
                    continue
                if typ == NLMSG_ERROR:
                    err = struct.unpack_from("=i", msg)[0]
                    if err:
                        raise NlError(-err)
                    return replies  # the ACK
                if typ == NLMSG_DONE:
                    return replies
                replies.append(msg[4:])
                if not dump:
                    return replies

    def family_id(self, name):
        try:
            r = self.request(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, attr(CTRL_ATTR_FAMILY_NAME, name.encode() + b"\0"))
        except NlError as e:
            if e.args[0] == errno.ENOENT:
                print(f"smc_pnet: generic netlink family {name} not registered (modprobe smc)", file=sys.stderr)
                sys.exit(3)
            raise
        for typ, val in attrs_parse(r[0]):
            if typ == CTRL_ATTR_FAMILY_ID:
                return struct.unpack("=H", val[:2])[0]
        raise NlError(errno.ENOENT)


def main(argv):
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    g = Genl()
    cmd = argv[0]
    try:
        if cmd == "pnet-add":
            pnetid, rest = argv[1], argv[2:]
            opts = dict(zip(rest[0::2], rest[1::2]))
            payload = attr(SMC_PNETID_NAME, pnetid.upper().encode() + b"\0")
            if "--eth" in opts:
                payload += attr(SMC_PNETID_ETHNAME, opts["--eth"].encode() + b"\0")
            if "--ib" in opts:
                payload += attr(SMC_PNETID_IBNAME, opts["--ib"].encode() + b"\0")
                payload += attr(SMC_PNETID_IBPORT, struct.pack("=B", int(opts.get("--port", "1"))))
            g.request(g.family_id("SMC_PNETID"), SMC_PNETID_ADD, payload)
            print(f"smc_pnet: pnet {pnetid.upper()}: {' '.join(rest)}")
        elif cmd == "pnet-flush":
            g.request(g.family_id("SMC_PNETID"), SMC_PNETID_FLUSH)
        elif cmd == "ueid-add":
            ueid = argv[1].upper()
            if len(ueid) > SMC_MAX_EID_LEN:
                print("smc_pnet: UEID longer than 32 characters", file=sys.stderr)
                return 2
            # the kernel wants exactly 33 bytes: 32 space-padded + NUL
            data = ueid.ljust(SMC_MAX_EID_LEN).encode() + b"\0"
            g.request(g.family_id("SMC_GEN_NETLINK"), SMC_NETLINK_ADD_UEID, attr(SMC_NLA_EID_TABLE_ENTRY, data))
            print(f"smc_pnet: ueid {ueid} added")
        elif cmd == "ueid-flush":
            g.request(g.family_id("SMC_GEN_NETLINK"), SMC_NETLINK_FLUSH_UEID)
        elif cmd == "fback-stats":
            for msg in g.request(g.family_id("SMC_GEN_NETLINK"), SMC_NETLINK_GET_FBACK_STATS, dump=True):
                for typ, nest in attrs_parse(msg):
                    if typ != SMC_GEN_FBACK_STATS:
                        continue
                    a = dict(attrs_parse(nest))
                    kind = "server" if a.get(SMC_NLA_FBACK_STATS_TYPE, b"\0")[0] else "client"
                    code = struct.unpack("=I", a.get(SMC_NLA_FBACK_STATS_RSN_CODE, b"\0" * 4)[:4])[0]
                    cnt = struct.unpack("=H", a.get(SMC_NLA_FBACK_STATS_RSN_CNT, b"\0" * 2)[:2])[0]
                    print(f"smc_pnet: fallback {kind} 0x{code:08x} x{cnt}")
        elif cmd == "lgr-dump":
            fam = g.family_id("SMC_GEN_NETLINK")
            u8 = lambda a, k: a[k][0] if k in a else -1
            u32 = lambda a, k: struct.unpack("=I", a[k][:4])[0] if k in a else -1
            text = lambda a, k: a.get(k, b"").split(b"\0")[0].decode(errors="replace").strip()
            seen = set()
            # GET_LINK_SMCR dumps each group followed by its links
            for msg in g.request(fam, SMC_NETLINK_GET_LINK_SMCR, dump=True):
                for typ, nest in attrs_parse(msg):
                    a = dict(attrs_parse(nest))
                    if typ == SMC_GEN_LGR_SMCR:
                        lgr = u32(a, LGR_ID)
                        if lgr in seen:
                            continue
                        seen.add(lgr)
                        v2 = dict(attrs_parse(a.get(LGR_V2_COMMON, b"")))
                        role = {0: "client", 1: "server"}.get(u8(a, LGR_ROLE), "?")
                        print(f"smc_pnet: lgr id=0x{lgr:08x} role={role} conns={u32(a, LGR_CONNS_NUM)} "
                              f"v2_ver={u8(v2, V2_VER)} v2_rel={u8(v2, V2_REL)} v2_os={u8(v2, V2_OS)} "
                              f"neg_eid={text(v2, V2_NEG_EID) or '-'} peer_host={text(v2, V2_PEER_HOST) or '-'}")
                    elif typ == SMC_GEN_LINK_SMCR:
                        # link uids travel as 4 raw bytes read as a host-order u32: print the bytes
                        raw = lambda k: struct.pack("=I", u32(a, k) & 0xFFFFFFFF).hex() if k in a else "-"
                        print(f"smc_pnet: link id={u8(a, LINK_ID)} ibdev={text(a, LINK_IB_DEV)} "
                              f"gid={text(a, LINK_GID)} peer_gid={text(a, LINK_PEER_GID)} conns={u32(a, LINK_CONN_CNT)} "
                              f"uid={raw(LINK_UID)} peer_uid={raw(LINK_PEER_UID)} state={u32(a, LINK_STATE)}")
        elif cmd == "stats":
            for msg in g.request(g.family_id("SMC_GEN_NETLINK"), SMC_NETLINK_GET_STATS, dump=True):
                for typ, nest in attrs_parse(msg):
                    if typ != SMC_GEN_STATS:
                        continue
                    tech = dict(attrs_parse(dict(attrs_parse(nest)).get(STATS_SMCR_TECH, b"")))
                    vals = " ".join(f"{name}={struct.unpack('=Q', tech[k][:8])[0] if len(tech.get(k, b'')) >= 8 else 0}"
                                    for k, name in STATS_T.items())
                    print(f"smc_pnet: stats smcr {vals}")
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except NlError as e:
        print(f"smc_pnet: {cmd}: kernel error {os.strerror(e.args[0])} ({e.args[0]})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
