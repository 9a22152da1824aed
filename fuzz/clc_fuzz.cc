// Feeds arbitrary bytes to the CLC header parser and every CLC decoder, and
// checks that whatever decodes also re-encodes to something that decodes to
// the same value.
#include <cstdlib>
#include <vector>

#include "core/clc.h"

using namespace smcr::clc;

namespace {

void check(bool condition) {
  if (!condition) std::abort();
}

void decode_all(std::span<const uint8_t> bytes) {
  DecodeError err = DecodeError::kNone;
  const auto header = decode_header(bytes, &err);
  (void)to_string(err);

  if (auto p = decode_proposal(bytes, &err)) {
    check(header && header->type == Type::kProposal && header->length == bytes.size());
    check(p->ipv6_prefixes.size() <= 8);
    if (header->smcd) check(!p->offers_smcr_v1);
    if (p->version == 1 && !header->smcd) {
      // Encoding emits version 1, so a v1 Proposal must survive unchanged.
      auto again = decode_proposal(encode(*p));
      check(again && *again == *p);
    }
    if (p->v2 && !header->smcd) {
      // Re-encoded in our v2 layout, the offer (and whether v1 is offered
      // too) survives.
      check(p->v2->ueids.size() <= kMaxUeids);
      auto again = decode_proposal(encode(*p));
      check(again && again->v2 == p->v2 && again->offers_smcr_v1 == p->offers_smcr_v1);
    }
  }
  for (Type type : {Type::kAccept, Type::kConfirm}) {
    if (auto m = decode_accept_confirm(bytes, type, &err)) {
      check(header && header->type == type && header->length == bytes.size() && !header->smcd);
      check(m->rmbe_index != 0 && m->rmbe_size_code <= 5 && m->mtu_code >= 1 && m->mtu_code <= 5);
      AcceptConfirm expected = *m;
      // F is never sent in a v1 Confirm; a v2 one carries it as Linux does.
      if (type == Type::kConfirm && !m->v2) expected.first_contact = false;
      auto again = decode_accept_confirm(encode(*m), type);
      check(again && *again == expected);
    }
    (void)to_string(err);
  }
  if (auto d = decode_decline(bytes, &err)) {
    check(header && header->type == Type::kDecline);
    (void)decline_reason(d->diagnosis);
    auto again = decode_decline(encode(*d));
    check(again && *again == *d);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  std::span<const uint8_t> rest(data + 1, size - 1);
  decode_all(rest);

  // Random bytes rarely carry both eyecatchers and a matching length; frame
  // the input as a message so the decoders' field checks get exercised too.
  // (mode bit 1: with Linux's SMC-D eyecatcher).
  if (mode & 1) {
    const auto& eye = mode & 2 ? kSmcdEyecatcher : kEyecatcher;
    std::vector<uint8_t> framed(eye.begin(), eye.end());
    framed.insert(framed.end(), rest.begin(), rest.end());
    framed.insert(framed.end(), eye.begin(), eye.end());
    if (framed.size() >= kHeaderLen && framed.size() <= 0xFFFF) {
      framed[5] = static_cast<uint8_t>(framed.size() >> 8);
      framed[6] = static_cast<uint8_t>(framed.size());
      decode_all(framed);
    }
  }
  // A stream reader hands the decoder exactly Length bytes after the header.
  if (auto header = decode_header(rest); header && header->length <= rest.size()) {
    decode_all(rest.first(header->length));
  }
  return 0;
}
