#include "core/verbs_loader.h"

#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>

#include <mutex>

namespace smcr {
namespace {

// Each function with the symbol version the linker would have bound
// (rdma-core's default version of it): dlvsym, so that a newer rdma-core's
// changed ABI under a new version never meets our older call.
#define SMCR_VERBS_FUNCTIONS(X)                 \
  X(ibv_get_device_list, "IBVERBS_1.1")         \
  X(ibv_free_device_list, "IBVERBS_1.1")        \
  X(ibv_get_device_name, "IBVERBS_1.1")         \
  X(ibv_open_device, "IBVERBS_1.1")             \
  X(ibv_query_device, "IBVERBS_1.1")            \
  X(ibv_query_port, "IBVERBS_1.1")              \
  X(ibv_query_gid, "IBVERBS_1.1")               \
  X(_ibv_query_gid_ex, "IBVERBS_1.11")          \
  X(_ibv_query_gid_table, "IBVERBS_1.11")       \
  X(ibv_get_async_event, "IBVERBS_1.1")         \
  X(ibv_ack_async_event, "IBVERBS_1.1")         \
  X(ibv_event_type_str, "IBVERBS_1.1")          \
  X(ibv_alloc_pd, "IBVERBS_1.1")                \
  X(ibv_dealloc_pd, "IBVERBS_1.1")              \
  X(ibv_reg_mr, "IBVERBS_1.1")                  \
  X(ibv_dereg_mr, "IBVERBS_1.1")                \
  X(ibv_create_comp_channel, "IBVERBS_1.0")     \
  X(ibv_destroy_comp_channel, "IBVERBS_1.0")    \
  X(ibv_create_cq, "IBVERBS_1.1")               \
  X(ibv_destroy_cq, "IBVERBS_1.1")              \
  X(ibv_get_cq_event, "IBVERBS_1.1")            \
  X(ibv_ack_cq_events, "IBVERBS_1.1")           \
  X(ibv_create_qp, "IBVERBS_1.1")               \
  X(ibv_modify_qp, "IBVERBS_1.1")               \
  X(ibv_query_qp, "IBVERBS_1.1")                \
  X(ibv_destroy_qp, "IBVERBS_1.1")              \
  X(ibv_set_ece, "IBVERBS_1.10")                \
  X(ibv_query_ece, "IBVERBS_1.10")              \
  X(ibv_wc_status_str, "IBVERBS_1.1")

struct Verbs {
#define SMCR_VERBS_SLOT(name, version) decltype(&::name) name = nullptr;
  SMCR_VERBS_FUNCTIONS(SMCR_VERBS_SLOT)
#undef SMCR_VERBS_SLOT
  bool loaded = false;
  std::string error;
};

// Never freed, never unloaded: contexts and memory registrations live as long
// as the process, and the application may hold the same library itself.
Verbs& verbs_state() {
  static Verbs* v = new Verbs();
  return *v;
}

const Verbs* load() {
  static std::once_flag once;
  std::call_once(once, [] {
    Verbs& v = verbs_state();
    void* lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      v.error = std::string("rdma-core's libibverbs.so.1 cannot be loaded: ") + (e ? e : "unknown error");
      return;
    }
#define SMCR_VERBS_RESOLVE(name, version)                                               \
  v.name = reinterpret_cast<decltype(v.name)>(dlvsym(lib, #name, version));            \
  if (!v.name) {                                                                       \
    v.error = "libibverbs.so.1 has no " #name "@" version " (rdma-core too old)";       \
    return;                                                                            \
  }
    SMCR_VERBS_FUNCTIONS(SMCR_VERBS_RESOLVE)
#undef SMCR_VERBS_RESOLVE
    v.loaded = true;
  });
  const Verbs& v = verbs_state();
  return v.loaded ? &v : nullptr;
}

// Forwards to the library's function, or fails as the library fails when
// there is no device: without the library no device was ever opened, so only
// the device scan can get here.
template <typename Slot, typename Fail, typename... Args>
auto forward(Slot Verbs::*slot, Fail fail, Args... args) {
  const Verbs* v = load();
  if (!v) {
    errno = ENOSYS;
    return static_cast<decltype((v->*slot)(args...))>(fail);
  }
  return (v->*slot)(args...);
}

template <typename Slot, typename... Args>
void forward_void(Slot Verbs::*slot, Args... args) {
  if (const Verbs* v = load()) (v->*slot)(args...);
}

}  // namespace

bool verbs_library_loaded(std::string* why) {
  if (load()) return true;
  if (why) *why = verbs_state().error;
  return false;
}

}  // namespace smcr

// The definitions the verbs fabric links against, in place of libibverbs'
// (hidden: the shim exports none of them). Parenthesised names keep verbs.h's
// function-like macros of the same names (ibv_reg_mr, ibv_query_port) from
// expanding.
using smcr::forward;
using smcr::forward_void;
using smcr::Verbs;

extern "C" {

struct ibv_device** (ibv_get_device_list)(int* num) {
  return forward(&Verbs::ibv_get_device_list, nullptr, num);
}
void (ibv_free_device_list)(struct ibv_device** list) { forward_void(&Verbs::ibv_free_device_list, list); }
const char* (ibv_get_device_name)(struct ibv_device* d) { return forward(&Verbs::ibv_get_device_name, nullptr, d); }
struct ibv_context* (ibv_open_device)(struct ibv_device* d) { return forward(&Verbs::ibv_open_device, nullptr, d); }
int (ibv_query_device)(struct ibv_context* c, struct ibv_device_attr* a) {
  return forward(&Verbs::ibv_query_device, ENOSYS, c, a);
}
int (ibv_query_port)(struct ibv_context* c, uint8_t port, struct _compat_ibv_port_attr* a) {
  return forward(&Verbs::ibv_query_port, ENOSYS, c, port, a);
}
int (ibv_query_gid)(struct ibv_context* c, uint8_t port, int index, union ibv_gid* gid) {
  return forward(&Verbs::ibv_query_gid, -1, c, port, index, gid);
}
int (_ibv_query_gid_ex)(struct ibv_context* c, uint32_t port, uint32_t index, struct ibv_gid_entry* e, uint32_t flags,
                        size_t entry_size) {
  return forward(&Verbs::_ibv_query_gid_ex, ENOSYS, c, port, index, e, flags, entry_size);
}
ssize_t (_ibv_query_gid_table)(struct ibv_context* c, struct ibv_gid_entry* e, size_t max, uint32_t flags,
                               size_t entry_size) {
  return forward(&Verbs::_ibv_query_gid_table, -ENOSYS, c, e, max, flags, entry_size);
}
int (ibv_get_async_event)(struct ibv_context* c, struct ibv_async_event* e) {
  return forward(&Verbs::ibv_get_async_event, -1, c, e);
}
void (ibv_ack_async_event)(struct ibv_async_event* e) { forward_void(&Verbs::ibv_ack_async_event, e); }
const char* (ibv_event_type_str)(enum ibv_event_type t) { return forward(&Verbs::ibv_event_type_str, "unknown", t); }
struct ibv_pd* (ibv_alloc_pd)(struct ibv_context* c) { return forward(&Verbs::ibv_alloc_pd, nullptr, c); }
int (ibv_dealloc_pd)(struct ibv_pd* pd) { return forward(&Verbs::ibv_dealloc_pd, ENOSYS, pd); }
struct ibv_mr* (ibv_reg_mr)(struct ibv_pd* pd, void* addr, size_t len, int access) {
  return forward(&Verbs::ibv_reg_mr, nullptr, pd, addr, len, access);
}
int (ibv_dereg_mr)(struct ibv_mr* mr) { return forward(&Verbs::ibv_dereg_mr, ENOSYS, mr); }
struct ibv_comp_channel* (ibv_create_comp_channel)(struct ibv_context* c) {
  return forward(&Verbs::ibv_create_comp_channel, nullptr, c);
}
int (ibv_destroy_comp_channel)(struct ibv_comp_channel* ch) {
  return forward(&Verbs::ibv_destroy_comp_channel, ENOSYS, ch);
}
struct ibv_cq* (ibv_create_cq)(struct ibv_context* c, int cqe, void* ctx, struct ibv_comp_channel* ch, int vector) {
  return forward(&Verbs::ibv_create_cq, nullptr, c, cqe, ctx, ch, vector);
}
int (ibv_destroy_cq)(struct ibv_cq* cq) { return forward(&Verbs::ibv_destroy_cq, ENOSYS, cq); }
int (ibv_get_cq_event)(struct ibv_comp_channel* ch, struct ibv_cq** cq, void** ctx) {
  return forward(&Verbs::ibv_get_cq_event, -1, ch, cq, ctx);
}
void (ibv_ack_cq_events)(struct ibv_cq* cq, unsigned int n) { forward_void(&Verbs::ibv_ack_cq_events, cq, n); }
struct ibv_qp* (ibv_create_qp)(struct ibv_pd* pd, struct ibv_qp_init_attr* a) {
  return forward(&Verbs::ibv_create_qp, nullptr, pd, a);
}
int (ibv_modify_qp)(struct ibv_qp* qp, struct ibv_qp_attr* a, int mask) {
  return forward(&Verbs::ibv_modify_qp, ENOSYS, qp, a, mask);
}
int (ibv_query_qp)(struct ibv_qp* qp, struct ibv_qp_attr* a, int mask, struct ibv_qp_init_attr* init) {
  return forward(&Verbs::ibv_query_qp, ENOSYS, qp, a, mask, init);
}
int (ibv_destroy_qp)(struct ibv_qp* qp) { return forward(&Verbs::ibv_destroy_qp, ENOSYS, qp); }
int (ibv_set_ece)(struct ibv_qp* qp, struct ibv_ece* e) { return forward(&Verbs::ibv_set_ece, ENOSYS, qp, e); }
int (ibv_query_ece)(struct ibv_qp* qp, struct ibv_ece* e) { return forward(&Verbs::ibv_query_ece, ENOSYS, qp, e); }
const char* (ibv_wc_status_str)(enum ibv_wc_status s) { return forward(&Verbs::ibv_wc_status_str, "unknown", s); }

}  // extern "C"
