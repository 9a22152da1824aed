// SPDX-License-Identifier: GPL-2.0
/*
 * smcr_option.bpf.c - cgroup sockops program that puts the SMC-R experimental
 * TCP option (RFC 7609: kind 254, length 6, ExID 0xE2D4C3D9, bytes
 * fe 06 e2 d4 c3 d9) on the SYN and SYN-ACK of opted-in sockets only, and
 * records per socket whether both directions carried it.
 *
 * OPT-IN DESIGN
 *   "smcr_optin" is a BPF_MAP_TYPE_SK_STORAGE map. The LD_PRELOAD shim writes
 *   it from userspace with the socket's own fd as the key
 *   (BPF_MAP_UPDATE_ELEM(map, &sockfd, &SMCR_OPTIN_MAGIC)) before connect()
 *   (client) or before listen() (server). Only a process holding the socket
 *   fd can do that, so a process not running under the shim never sends the
 *   option, even in the same cgroup. The map is pinned 0666 so unprivileged
 *   processes can opt in their own sockets (the kernel resolves the fd in the
 *   caller's fd table; nobody can touch another process' sockets).
 *   Accepted children do not inherit it (no BPF_F_CLONE: a cloned entry
 *   would cost each child an allocation and a free); the passive side finds
 *   its listener in "smcr_listeners" instead, as the SYN-ACK callback does.
 *
 * ACTIVE SIDE
 *   TCP_CONNECT_CB: if opted in, enable WRITE_HDR_OPT callbacks and create the
 *   result record. HDR_OPT_LEN_CB on the SYN reserves 8 bytes (option + 2 NOP
 *   padding); WRITE_HDR_OPT_CB stores it and sets WE_SENT_SYN_OPT (a failed
 *   reservation, e.g. a TFO SYN with full option space, clears it).
 *   ACTIVE_ESTABLISHED_CB reads the option from the SYN-ACK (skops->skb).
 *
 * PASSIVE SIDE
 *   TCP_LISTEN_CB: if the listener is opted in, set TCP_SAVE_SYN, register it
 *   in the hash "smcr_listeners" keyed by (netns cookie, local port, bound
 *   address; v4 as ::ffff:a.b.c.d) and enable WRITE_HDR_OPT and STATE
 *   callbacks on it (children inherit the flags; STATE_CB removes the entry
 *   when the listener leaves LISTEN).
 *   HDR_OPT_LEN_CB for a SYN-ACK runs for the request sock, and skops->sk is
 *   NULL there (not a full socket; measured). So the listener is found by
 *   (netns, local port, local address) with fallbacks to the wildcard
 *   addresses. We advertise only if (a) it is not a SYN-cookie SYN-ACK
 *   (args[0] & BPF_WRITE_HDR_TCP_SYNACK_COOKIE), (b) the listener is
 *   registered (opted in before listen(), so it has TCP_SAVE_SYN and the child
 *   will carry the saved SYN), and (c) the SYN carried the option
 *   (BPF_LOAD_HDR_OPT_TCP_SYN reads the SYN being answered).
 *   A SYN-ACK that gets the reservation is counted in "smcr_offers" (per
 *   local port, read by the shim through a read-only mapping) before its
 *   child can be queued: accept() reads a child's record only while the
 *   port has an offer not yet matched by an accepted child with the option.
 *   PASSIVE_ESTABLISHED_CB on the child re-evaluates: the same listener
 *   lookup as (b), and the saved SYN (cookie children have none -> not ok,
 *   matching (a)). A child whose listener is not registered gets no record.
 *   A SYN-ACK whose reservation/store failed (option space full) is remembered
 *   in the LRU hash "smcr_synack_fail" keyed by (netns, 4-tuple, the SYN's
 *   TSval), with its time (an entry older than a request sock lives is void); the child
 *   consults it at PASSIVE_ESTABLISHED_CB, and a TFO child (established before
 *   its SYN-ACK is sent) again when it leaves SYN_RECV (STATE_CB).
 *   Limitations: an application that clears TCP_SAVE_SYN on an opted-in
 *   listener itself makes its children report not-ok while the SYN-ACK
 *   carried the option; a SO_REUSEPORT group mixing opted-in and plain
 *   listeners on one address is treated as opted in; opting a listener in
 *   after listen() has no effect on it.
 *
 *   Why not the listener's SK_STORAGE at SYN-ACK time: skops->sk is NULL for
 *   request socks, and even from a request pointer the verifier types
 *   rsk_listener as a scalar (it shares a union with skc_flags) and rejects
 *   bpf_rdonly_cast() results in bpf_sk_storage_get() ("R1 type=untrusted_ptr_
 *   expected=sock_common, ..."; measured on 6.18).
 *
 * NEVER ON OTHER SEGMENTS
 *   Only segments with SYN set get a reservation. The first real non-SYN
 *   segment seen on a full socket clears BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG
 *   (not at PASSIVE_ESTABLISHED: with TFO the child exists before its SYN-ACK).
 *
 * Several loads of this program may be attached at once (e.g. tests in a child
 * cgroup under a system-wide load): each consults only its own maps, so each
 * writes only for sockets opted into its own map.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "smcr_abi.h"

#define SOL_TCP 6
#define TCP_SAVE_SYN 27
#define TCPHDR_SYN 0x02
#define TCPHDR_ACK 0x10
#define AF_INET6 10
#define AF_INET 2
#define EEXIST 17

/* Keeps clang from merging ctx loads of different branches into a load
 * through a computed ctx pointer ("dereference of modified ctx ptr"). */
#define SMCR_BARRIER(x) asm volatile("" : "+r"(x))

#define SMCR_OPT_KIND 254
#define SMCR_OPT_LEN 6
#define SMCR_RESERVE 8

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u32);
} smcr_optin SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u32);
} smcr_result SEC(".maps");

/* One connection attempt: the 4-tuple alone comes back within seconds when
 * ephemeral ports cycle, and an entry whose child never came (the client gave
 * up) must not speak for the next connection on it. The SYN's TSval (0
 * without timestamps) tells attempts apart; the value, when the SYN-ACK
 * failed (ns), bounds an entry's life to the SYN-ACK retransmissions'. */
struct fail_key {
	__u64 netns;
	__u32 family;
	__u32 lport;
	__u32 rport;
	__u32 laddr[4];
	__u32 raddr[4];
	__u32 syn_tsval;
};

/* Longer than a request sock lives (tcp_synack_retries 5: about 63 s). */
#define SMCR_FAIL_MAX_AGE_NS (180ULL * 1000000000ULL)

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct fail_key);
	__type(value, __u64);
} smcr_synack_fail SEC(".maps");

/* Opted-in listeners: (netns, port, bound address) -> 1. */
struct listener_key {
	__u64 netns;
	__u32 port;
	__u32 addr[4]; /* IPv6, or IPv4 as ::ffff:a.b.c.d; wildcard: :: or ::ffff:0.0.0.0 */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct listener_key);
	__type(value, __u8);
} smcr_listeners SEC(".maps");

/* Per local port: SYN-ACKs that carried the option, counted before the
 * child can be accepted (a TFO child's SYN-ACK goes before it is queued).
 * Mapped read-only by the shim: a listener whose count equals the number of
 * its process's accepted children that had the option has no child waiting
 * that offered SMC-R, and its accept() skips the bpf(2) call for the
 * child's record (bpf/option.h: offers_pending). Counted where the room is
 * reserved (HDR_OPT_LEN_CB, once per SYN-ACK; the kernel asked WRITE_HDR_OPT
 * twice per SYN-ACK here, measured on 6.18). Retransmitted SYN-ACKs, a store
 * that failed after the reservation, and children never accepted only make
 * the count higher: a look that is not needed, never one that is skipped. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, SMCR_OFFERS_PORTS);
	__type(key, __u32);
	__type(value, __u64);
} smcr_offers SEC(".maps");

static __always_inline void count_offer(struct bpf_sock_ops *skops)
{
	__u32 port = skops->local_port; /* host byte order */
	__u64 *n = bpf_map_lookup_elem(&smcr_offers, &port);

	if (n)
		__sync_fetch_and_add(n, 1);
}

/* kind, len, ExID (big endian on the wire) */
static const __u8 smcr_opt_bytes[SMCR_OPT_LEN] = { 0xfe, 0x06, 0xe2, 0xd4, 0xc3, 0xd9 };

static __always_inline int has_smcr_opt(struct bpf_sock_ops *skops, __u64 flags)
{
	__u8 buf[SMCR_RESERVE] = { SMCR_OPT_KIND, SMCR_OPT_LEN, 0xe2, 0xd4, 0xc3, 0xd9, 0, 0 };
	return bpf_load_hdr_opt(skops, buf, sizeof(buf), flags) == SMCR_OPT_LEN;
}

static __always_inline int opted_in(struct bpf_sock *sk)
{
	__u32 *v = bpf_sk_storage_get(&smcr_optin, sk, 0, 0);
	return v && *v == SMCR_OPTIN_MAGIC;
}

static __always_inline __u32 *result_of(struct bpf_sock *sk, int create)
{
	return bpf_sk_storage_get(&smcr_result, sk, 0,
				  create ? BPF_SK_STORAGE_GET_F_CREATE : 0);
}

static __always_inline void set_cb_flag(struct bpf_sock_ops *skops, __u32 flag, int on)
{
	__u32 f = skops->bpf_sock_ops_cb_flags;
	__u32 nf = on ? (f | flag) : (f & ~flag);
	if (nf != f)
		bpf_sock_ops_cb_flags_set(skops, nf);
}

/* Local address of skops as a 16-byte (v4-mapped) address. */
static __always_inline void local_addr(struct bpf_sock_ops *skops, __u32 a[4])
{
	__u32 w0, w1, w2, w3;

	if (skops->family == AF_INET6) {
		w0 = skops->local_ip6[0];
		SMCR_BARRIER(w0);
		w1 = skops->local_ip6[1];
		SMCR_BARRIER(w1);
		w2 = skops->local_ip6[2];
		SMCR_BARRIER(w2);
		w3 = skops->local_ip6[3];
		SMCR_BARRIER(w3);
	} else {
		w0 = 0;
		w1 = 0;
		w2 = bpf_htonl(0xffff);
		w3 = skops->local_ip4;
		SMCR_BARRIER(w3);
	}
	a[0] = w0;
	a[1] = w1;
	a[2] = w2;
	a[3] = w3;
}

static __always_inline void listener_key_of(struct bpf_sock_ops *skops, struct listener_key *k)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->netns = bpf_get_netns_cookie(skops);
	k->port = skops->local_port;
	local_addr(skops, k->addr);
}

/* For a request sock: is the listener that received this SYN opted in? */
static __always_inline int listener_opted_in(struct bpf_sock_ops *skops)
{
	struct listener_key k;

	listener_key_of(skops, &k);
	if (bpf_map_lookup_elem(&smcr_listeners, &k))
		return 1;
	if (k.addr[0] == 0 && k.addr[1] == 0 && k.addr[2] == bpf_htonl(0xffff)) {
		k.addr[3] = 0; /* bound to 0.0.0.0 */
		if (bpf_map_lookup_elem(&smcr_listeners, &k))
			return 1;
	}
	k.addr[0] = k.addr[1] = k.addr[2] = k.addr[3] = 0; /* bound to :: */
	return bpf_map_lookup_elem(&smcr_listeners, &k) != 0;
}

/* The TSval of the SYN being answered (request sock) or saved (child), or 0. */
static __always_inline __u32 syn_tsval(struct bpf_sock_ops *skops)
{
	__u8 ts[10] = { 8, 10 }; /* kind 8, length 10: TSval, TSecr */

	if (bpf_load_hdr_opt(skops, ts, sizeof(ts), BPF_LOAD_HDR_OPT_TCP_SYN) != 10)
		return 0;
	return ((__u32)ts[2] << 24) | ((__u32)ts[3] << 16) | ((__u32)ts[4] << 8) | ts[5];
}

static __always_inline void make_fail_key(struct bpf_sock_ops *skops, struct fail_key *k)
{
	__u32 r0 = 0, r1 = 0, r2 = 0, r3 = 0;

	__builtin_memset(k, 0, sizeof(*k));
	k->netns = bpf_get_netns_cookie(skops);
	k->family = skops->family;
	k->lport = skops->local_port;
	k->rport = skops->remote_port;
	local_addr(skops, k->laddr);
	if (k->family == AF_INET6) {
		r0 = skops->remote_ip6[0];
		SMCR_BARRIER(r0);
		r1 = skops->remote_ip6[1];
		SMCR_BARRIER(r1);
		r2 = skops->remote_ip6[2];
		SMCR_BARRIER(r2);
		r3 = skops->remote_ip6[3];
		SMCR_BARRIER(r3);
	} else {
		r3 = skops->remote_ip4;
		SMCR_BARRIER(r3);
	}
	k->raddr[0] = r0;
	k->raddr[1] = r1;
	k->raddr[2] = r2;
	k->raddr[3] = r3;
	k->syn_tsval = syn_tsval(skops);
}

static __always_inline void synack_failed(struct bpf_sock_ops *skops)
{
	struct fail_key k;
	__u64 now = bpf_ktime_get_ns();

	make_fail_key(skops, &k);
	bpf_map_update_elem(&smcr_synack_fail, &k, &now, BPF_ANY);
}

/* Child side: did the SYN-ACK for this connection fail to carry the option? */
static __always_inline int synack_fail_consume(struct bpf_sock_ops *skops)
{
	struct fail_key k;
	__u64 *when, at;

	make_fail_key(skops, &k);
	when = bpf_map_lookup_elem(&smcr_synack_fail, &k);
	if (!when)
		return 0;
	at = *when;
	bpf_map_delete_elem(&smcr_synack_fail, &k);
	return bpf_ktime_get_ns() - at < SMCR_FAIL_MAX_AGE_NS;
}

/* HDR_OPT_LEN_CB. sk is NULL for request socks (SYN-ACK). */
static __always_inline void on_hdr_opt_len(struct bpf_sock_ops *skops, struct bpf_sock *sk)
{
	__u8 tcpf = skops->skb_tcp_flags;
	__u32 *r;

	if (skops->args[0] & BPF_WRITE_HDR_TCP_CURRENT_MSS)
		return; /* MSS computation, no skb: never reserve, never clear */

	if (!(tcpf & TCPHDR_SYN)) {
		/* First real non-SYN segment on a full socket: stop callbacks. */
		if (sk)
			set_cb_flag(skops, BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG, 0);
		return;
	}

	if (!sk) {
		/* SYN-ACK of a request sock (also for TFO). */
		if (!(tcpf & TCPHDR_ACK))
			return;
		if (skops->args[0] & BPF_WRITE_HDR_TCP_SYNACK_COOKIE)
			return; /* cookie: the child will have no saved SYN */
		if (!listener_opted_in(skops))
			return;
		if (!has_smcr_opt(skops, BPF_LOAD_HDR_OPT_TCP_SYN))
			return;
		if (bpf_reserve_hdr_opt(skops, SMCR_RESERVE, 0))
			synack_failed(skops);
		else
			count_offer(skops);
		return;
	}

	if (!(tcpf & TCPHDR_ACK)) {
		/* Active SYN (incl. retransmissions and TFO SYN with data). */
		if (!opted_in(sk))
			return;
		if (bpf_reserve_hdr_opt(skops, SMCR_RESERVE, 0)) {
			r = result_of(sk, 1);
			if (r)
				*r = (*r | SMCR_R_ACTIVE) & ~(SMCR_R_WE_SENT_SYN_OPT | SMCR_R_SMC_OK);
		}
		return;
	}

	/* SYN-ACK (re)sent by a full socket (TFO child retransmission): repeat
	 * only what the child recorded as sent. */
	r = result_of(sk, 0);
	if (r && (*r & SMCR_R_WE_SENT_SYNACK_OPT))
		bpf_reserve_hdr_opt(skops, SMCR_RESERVE, 0);
}

/* Would our HDR_OPT_LEN_CB have reserved room on this SYN-ACK of a request
 * sock? The same decision, made again: nothing is carried between the two
 * callbacks of a request sock. */
static __always_inline int synack_wants_option(struct bpf_sock_ops *skops)
{
	if (!(skops->skb_tcp_flags & TCPHDR_ACK))
		return 0;
	if (skops->args[0] & BPF_WRITE_HDR_TCP_SYNACK_COOKIE)
		return 0;
	return listener_opted_in(skops) && has_smcr_opt(skops, BPF_LOAD_HDR_OPT_TCP_SYN);
}

/* WRITE_HDR_OPT_CB. The kernel calls every program on the socket's path once
 * any of them reserved room, so this one may be asked to write on a segment
 * it reserved nothing for: another load of this program (a test's or a
 * container's under the host's), or an unrelated program with an option of
 * its own. It writes, and records, only for sockets opted into its own maps
 * (the decision of on_hdr_opt_len, made again); anything else would put the
 * option on a socket that did not opt in, or leave a SYN-ACK "failure" in
 * smcr_synack_fail for a connection this load never saw. */
static __always_inline void on_write_hdr_opt(struct bpf_sock_ops *skops, struct bpf_sock *sk)
{
	__u8 tcpf = skops->skb_tcp_flags;
	__u32 *r;
	int err;

	if (!(tcpf & TCPHDR_SYN))
		return; /* never on non-SYN segments */
	if (!sk) {
		if (!synack_wants_option(skops))
			return;
	} else if (tcpf & TCPHDR_ACK) {
		/* TFO child SYN-ACK retransmission: as the child recorded. */
		r = result_of(sk, 0);
		if (!r || !(*r & SMCR_R_WE_SENT_SYNACK_OPT))
			return;
	} else if (!opted_in(sk)) {
		return;
	}
	err = bpf_store_hdr_opt(skops, smcr_opt_bytes, sizeof(smcr_opt_bytes), 0);
	if (err == -EEXIST)
		err = 0; /* another load of this program already wrote it */

	if (!sk) {
		if (err)
			synack_failed(skops);
		return;
	}
	if (tcpf & TCPHDR_ACK)
		return;
	r = result_of(sk, 1);
	if (!r)
		return;
	if (!err)
		*r |= SMCR_R_ACTIVE | SMCR_R_WE_SENT_SYN_OPT;
	else
		*r = (*r | SMCR_R_ACTIVE) & ~(SMCR_R_WE_SENT_SYN_OPT | SMCR_R_SMC_OK);
}

static __always_inline void on_listen(struct bpf_sock_ops *skops, struct bpf_sock *sk)
{
	struct listener_key k;
	__u8 one8 = 1;
	int one = 1;
	__u32 *v, *r;

	v = bpf_sk_storage_get(&smcr_optin, sk, 0, 0);
	if (!v || *v != SMCR_OPTIN_MAGIC)
		return;
	listener_key_of(skops, &k);
	if (bpf_setsockopt(skops, SOL_TCP, TCP_SAVE_SYN, &one, sizeof(one)) ||
	    bpf_map_update_elem(&smcr_listeners, &k, &one8, BPF_ANY)) {
		/* Cannot serve this listener: it stays unregistered (its
		 * SYN-ACKs carry no option, its children get no record), and
		 * its opt-in is withdrawn. */
		*v = 0;
		return;
	}
	r = result_of(sk, 1);
	if (r)
		*r = SMCR_R_LISTENER;
	bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags |
				  BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG |
				  BPF_SOCK_OPS_STATE_CB_FLAG);
}

static __always_inline void on_state(struct bpf_sock_ops *skops, struct bpf_sock *sk)
{
	struct listener_key k;
	__u32 *r;

	/* args[0] = old state, args[1] = new state */
	if (skops->args[0] == BPF_TCP_LISTEN) {
		listener_key_of(skops, &k);
		bpf_map_delete_elem(&smcr_listeners, &k);
		return;
	}
	if (skops->args[0] == BPF_TCP_SYN_RECV) {
		/* TFO child leaving SYN_RECV: its SYN-ACK has been sent by now. */
		r = result_of(sk, 0);
		if (r && (*r & SMCR_R_PASSIVE) && synack_fail_consume(skops))
			*r = (*r & ~(SMCR_R_WE_SENT_SYNACK_OPT | SMCR_R_SMC_OK)) |
			     SMCR_R_SYNACK_FAILED;
		set_cb_flag(skops, BPF_SOCK_OPS_STATE_CB_FLAG, 0);
	}
}

static __always_inline void on_active_established(struct bpf_sock_ops *skops, struct bpf_sock *sk)
{
	__u32 *r, f;

	if (!opted_in(sk))
		return;
	r = result_of(sk, 1);
	if (!r)
		return;
	f = (*r | SMCR_R_ACTIVE | SMCR_R_DONE) & ~(SMCR_R_PEER_SYNACK_HAD_OPT | SMCR_R_SMC_OK);
	if (has_smcr_opt(skops, 0)) /* skops->skb is the SYN-ACK */
		f |= SMCR_R_PEER_SYNACK_HAD_OPT;
	if ((f & SMCR_R_WE_SENT_SYN_OPT) && (f & SMCR_R_PEER_SYNACK_HAD_OPT))
		f |= SMCR_R_SMC_OK;
	*r = f;
	set_cb_flag(skops, BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG, 0);
}

static __always_inline void on_passive_established(struct bpf_sock_ops *skops, struct bpf_sock *sk)
{
	__u32 *r, f;
	int tfo;

	if (!listener_opted_in(skops)) /* as its SYN-ACK's callback decided */
		return;
	r = result_of(sk, 1);
	if (!r)
		return;
	/* A TFO child was made from its SYN and still holds the request sock.
	 * (Not the state: every child is still in SYN_RECV at this callback,
	 * the kernel moves it to ESTABLISHED after; measured on 6.18.) */
	{
		struct tcp_sock *tp = bpf_skc_to_tcp_sock(sk);

		tfo = tp && tp->fastopen_rsk;
	}
	f = SMCR_R_PASSIVE | SMCR_R_DONE;
	/* Cookie children have no saved SYN: the load fails -> not ok, and the
	 * cookie SYN-ACK carried no option either. */
	if (has_smcr_opt(skops, BPF_LOAD_HDR_OPT_TCP_SYN)) {
		f |= SMCR_R_PEER_SYN_HAD_OPT;
		if (!tfo && synack_fail_consume(skops))
			f |= SMCR_R_SYNACK_FAILED;
		else
			f |= SMCR_R_WE_SENT_SYNACK_OPT | SMCR_R_SMC_OK;
	}
	*r = f;
	/* A TFO child is queued for accept() before its SYN-ACK is sure to have
	 * gone: counted here too (a count too high is only a look too many). */
	if (tfo && (f & SMCR_R_PEER_SYN_HAD_OPT))
		count_offer(skops);
	/* The flags inherited from the listener are only kept for a TFO child:
	 * STATE_CB to re-check the SYN-ACK when it leaves SYN_RECV, WRITE_HDR_OPT
	 * because its SYN-ACK is still to come (then cleared on its first
	 * non-SYN segment). Any other child sends no SYN any more. */
	if (!tfo)
		set_cb_flag(skops, BPF_SOCK_OPS_STATE_CB_FLAG | BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG, 0);
}

SEC("sockops")
int smcr_sockops(struct bpf_sock_ops *skops)
{
	/* NULL for request socks (SYN-ACK callbacks). */
	struct bpf_sock *sk = skops->sk;

	switch (skops->op) {
	case BPF_SOCK_OPS_HDR_OPT_LEN_CB:
		on_hdr_opt_len(skops, sk);
		return 1;
	case BPF_SOCK_OPS_WRITE_HDR_OPT_CB:
		on_write_hdr_opt(skops, sk);
		return 1;
	}
	if (!sk)
		return 1;
	switch (skops->op) {
	case BPF_SOCK_OPS_TCP_CONNECT_CB:
		if (opted_in(sk)) {
			__u32 *r = result_of(sk, 1);
			if (r)
				*r = SMCR_R_ACTIVE;
			set_cb_flag(skops, BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG, 1);
		}
		break;
	case BPF_SOCK_OPS_TCP_LISTEN_CB:
		on_listen(skops, sk);
		break;
	case BPF_SOCK_OPS_STATE_CB:
		on_state(skops, sk);
		break;
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
		on_active_established(skops, sk);
		break;
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		on_passive_established(skops, sk);
		break;
	}
	return 1;
}
