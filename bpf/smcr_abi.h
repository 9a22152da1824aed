/* Shared between the BPF sockops program (smcr_option.bpf.c), the loader
 * (smcr_ctl) and the userspace reader (option.cc). Plain C, no includes, so
 * it can be used next to vmlinux.h as well as from C++. */
#ifndef SMCR_BPF_ABI_H
#define SMCR_BPF_ABI_H

/* Bits of the per-socket result (value of the "smcr_result" SK_STORAGE map,
 * a single 32-bit word). */
#define SMCR_R_WE_SENT_SYN_OPT      0x01u /* active: our SYN carried the option        */
#define SMCR_R_PEER_SYNACK_HAD_OPT  0x02u /* active: the SYN-ACK we got carried it      */
#define SMCR_R_PEER_SYN_HAD_OPT     0x04u /* passive: the (saved) SYN carried it        */
#define SMCR_R_WE_SENT_SYNACK_OPT   0x08u /* passive: our SYN-ACK carried it            */
#define SMCR_R_SMC_OK               0x10u /* both the SYN and the SYN-ACK carried it    */
#define SMCR_R_ACTIVE               0x20u /* record of an active (connect) socket       */
#define SMCR_R_PASSIVE              0x40u /* record of a passive (accepted) socket      */
#define SMCR_R_DONE                 0x80u /* handshake completed and evaluated          */
#define SMCR_R_LISTENER             0x100u /* record of an opted-in listener            */
#define SMCR_R_SYNACK_FAILED        0x200u /* passive: option could not be put in SYN-ACK */

/* Value written into the "smcr_optin" SK_STORAGE map by the shim. */
#define SMCR_OPTIN_MAGIC 0x534d4352u /* "SMCR" */

/* Names of the pins under the pin directory (default /sys/fs/bpf/smcr). */
#define SMCR_PIN_DIR_DEFAULT "/sys/fs/bpf/smcr"
#define SMCR_PIN_DIR_ENV     "SMCR_BPF_PIN_DIR"
#define SMCR_PIN_LINK   "link"
#define SMCR_PIN_PROG   "prog"
#define SMCR_PIN_OPTIN  "optin"   /* mode 0666: anyone may opt in their own sockets */
#define SMCR_PIN_RESULT "result"  /* mode 0444: anyone may read (open BPF_F_RDONLY) */
#define SMCR_PIN_FAIL   "synack_fail" /* mode 0600: internal */
#define SMCR_PIN_LISTENERS "listeners" /* mode 0600: internal */
#define SMCR_PIN_OFFERS "offers"  /* mode 0666, frozen: anyone may map it, nobody but the program writes it */

/* "smcr_offers": per local port (the index), the count of SYN-ACKs that
 * carried the option (u64; an array map with BPF_F_MMAPABLE). */
#define SMCR_OFFERS_PORTS 65536

#endif
