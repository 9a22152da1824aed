#include "core/close.h"

namespace smcr {

const char* to_string(CloseState s) {
  switch (s) {
    case CloseState::kActive: return "ACTIVE";
    case CloseState::kPeerCloseWait1: return "PEER_CLOSE_WAIT1";
    case CloseState::kPeerCloseWait2: return "PEER_CLOSE_WAIT2";
    case CloseState::kAppFinCloseWait: return "APP_FIN_CLOSE_WAIT";
    case CloseState::kAppCloseWait1: return "APP_CLOSE_WAIT1";
    case CloseState::kAppCloseWait2: return "APP_CLOSE_WAIT2";
    case CloseState::kPeerFinCloseWait: return "PEER_FIN_CLOSE_WAIT";
    case CloseState::kPeerAbortWait: return "PEER_ABORT_WAIT";
    case CloseState::kClosed: return "CLOSED";
  }
  return "?";
}

namespace {

constexpr CloseTransition stay(CloseState s) { return {s, kActNone, false}; }
constexpr CloseTransition go(CloseState s, uint32_t a) { return {s, a, true}; }

// Any state before we sent C may abort (RFC 4.8.2). AppFinCloseWait too:
// there we sent D and the peer its C; our C waits for the application.
bool may_abort(CloseState s) {
  return s == CloseState::kActive || s == CloseState::kPeerCloseWait1 || s == CloseState::kPeerCloseWait2 ||
         s == CloseState::kAppFinCloseWait || s == CloseState::kAppCloseWait1 || s == CloseState::kAppCloseWait2;
}

}  // namespace

CloseTransition close_transition(CloseState s, CloseEvent e, const CloseContext& ctx) {
  using S = CloseState;
  using E = CloseEvent;

  if (e == E::kPeerAbort) {
    if (s == S::kClosed) return stay(s);
    if (s == S::kPeerAbortWait) return go(S::kClosed, kActReleaseRmbe | kActResetTcp);
    // Passive abort: tell the application, answer with A unless we already
    // sent C (after C we must not send any further CDC). [LINUX] Unlike RFC
    // 4.8.2 2A, bytes received before the A are not purged: they stay
    // readable ahead of the reset, as TCP's queued data before an RST (and
    // Linux SMC's) -- a response followed by an abortive close still arrives.
    uint32_t a = kActWakeReaders | kActResetTcp | kActReleaseRmbe;
    if (may_abort(s)) a |= kActSendAbort;
    return go(S::kClosed, a);
  }
  if (e == E::kAppAbort) {
    if (!may_abort(s)) {
      if (s == S::kClosed || s == S::kPeerAbortWait) return stay(s);
      // C already sent: nothing more may go to the peer; just drop the TCP.
      return go(s, kActResetTcp);
    }
    return go(S::kPeerAbortWait, kActSendAbort | kActPurge | kActWakeReaders | kActResetTcp | kActStartTimer);
  }
  if (e == E::kTimeout) {
    switch (s) {
      case S::kPeerCloseWait1:
      case S::kPeerCloseWait2:
      case S::kPeerFinCloseWait:
        // Like FIN_WAIT_2 expiry: reset TCP, never write to the RMBE again.
        return go(S::kClosed, kActResetTcp | kActReleaseRmbe | kActWakeReaders);
      case S::kPeerAbortWait:
        return go(S::kClosed, kActReleaseRmbe);
      default:
        return stay(s);
    }
  }

  switch (s) {
    case S::kActive:
      switch (e) {
        case E::kAppShutdownWrite: return go(S::kPeerCloseWait1, kActSendDone);
        case E::kAppClose:
          if (ctx.unread_data)  // RFC 4.8.1 3A(1): close with unread data resets
            return close_transition(s, E::kAppAbort, ctx);
          return go(S::kPeerCloseWait1, kActSendClose | kActStartTimer);
        case E::kPeerDone: return go(S::kAppCloseWait1, kActWakeReaders);
        case E::kPeerClosed:
          if (ctx.pending_send) return close_transition(s, E::kAppAbort, ctx);
          return go(S::kAppCloseWait1, kActWakeReaders);
        default: return stay(s);
      }
    case S::kPeerCloseWait1:
      switch (e) {
        case E::kPeerDone: return go(S::kPeerCloseWait2, kActWakeReaders);
        case E::kPeerClosed:
          if (ctx.app_closed) return go(S::kClosed, kActWakeReaders | kActReleaseRmbe);
          return go(S::kAppFinCloseWait, kActWakeReaders);
        case E::kAppClose:
          // close() after shutdown(WR) [AMBIG in the RFC]: send C now.
          if (ctx.unread_data) return close_transition(s, E::kAppAbort, ctx);
          return go(S::kPeerCloseWait1, kActSendClose | kActStartTimer);
        default: return stay(s);
      }
    case S::kPeerCloseWait2:
      switch (e) {
        case E::kPeerClosed:
          if (ctx.app_closed) return go(S::kClosed, kActReleaseRmbe);
          return go(S::kAppFinCloseWait, kActNone);
        case E::kAppClose:
          if (ctx.unread_data) return close_transition(s, E::kAppAbort, ctx);
          return go(S::kPeerCloseWait2, kActSendClose | kActStartTimer);
        default: return stay(s);
      }
    case S::kAppFinCloseWait:
      if (e == E::kAppClose) {
        if (ctx.unread_data) return close_transition(s, E::kAppAbort, ctx);
        return go(S::kClosed, kActSendClose | kActReleaseRmbe);
      }
      return stay(s);
    case S::kAppCloseWait1:
      switch (e) {
        case E::kAppShutdownWrite: return go(S::kAppCloseWait2, kActSendDone);
        case E::kPeerClosed: return go(S::kAppCloseWait1, kActWakeReaders);  // D then C
        case E::kAppClose:
          if (ctx.unread_data) return close_transition(s, E::kAppAbort, ctx);
          if (ctx.peer_closed) return go(S::kClosed, kActSendClose | kActReleaseRmbe);
          return go(S::kPeerFinCloseWait, kActSendClose | kActStartTimer);
        default: return stay(s);
      }
    case S::kAppCloseWait2:
      switch (e) {
        case E::kPeerClosed: return go(S::kAppCloseWait2, kActWakeReaders);
        case E::kAppClose:
          if (ctx.unread_data) return close_transition(s, E::kAppAbort, ctx);
          if (ctx.peer_closed) return go(S::kClosed, kActSendClose | kActReleaseRmbe);
          return go(S::kPeerFinCloseWait, kActSendClose | kActStartTimer);
        default: return stay(s);
      }
    case S::kPeerFinCloseWait:
      if (e == E::kPeerClosed) return go(S::kClosed, kActReleaseRmbe);
      return stay(s);
    case S::kPeerAbortWait:
    case S::kClosed:
      return stay(s);
  }
  return stay(s);
}

bool local_write_closed(CloseState s) {
  return s != CloseState::kActive && s != CloseState::kAppCloseWait1;
}

bool peer_write_closed(CloseState s) {
  switch (s) {
    case CloseState::kActive:
    case CloseState::kPeerCloseWait1:
      return false;
    default:
      return true;
  }
}

}  // namespace smcr
