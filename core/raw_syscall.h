// The kernel's system call entry, without libc. The shim exports its own
// syscall() (preload/interpose_syscall.cc) so that an application's raw
// syscall(SYS_close, fd) reaches the interposer as close(fd) does (libuv,
// and so Node.js, closes every descriptor that way). Inside the library a
// call to ::syscall would then bind to that export and re-enter the
// interposer: the engine's own system calls come here instead.
#pragma once

#include <cerrno>
#include <type_traits>

namespace smcr::sys {

namespace detail {
template <typename T>
inline long syscall_arg(T v) {
  if constexpr (std::is_pointer_v<T> || std::is_null_pointer_v<T>)
    return reinterpret_cast<long>(v);
  else
    return static_cast<long>(v);
}

inline long raw_syscall6(long n, long a1, long a2, long a3, long a4, long a5, long a6) {
  long ret;
#if defined(__x86_64__)
  register long r10 asm("r10") = a4;
  register long r8 asm("r8") = a5;
  register long r9 asm("r9") = a6;
  asm volatile("syscall"
               : "=a"(ret)
               : "a"(n), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
               : "rcx", "r11", "memory");
#elif defined(__aarch64__)
  register long x8 asm("x8") = n;
  register long x0 asm("x0") = a1;
  register long x1 asm("x1") = a2;
  register long x2 asm("x2") = a3;
  register long x3 asm("x3") = a4;
  register long x4 asm("x4") = a5;
  register long x5 asm("x5") = a6;
  asm volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5) : "memory", "cc");
  ret = x0;
#else
#error "raw_syscall: add this architecture's system call convention"
#endif
  // The kernel returns -errno in [-4095, -1]; libc's convention is -1 + errno.
  if (static_cast<unsigned long>(ret) > -4096UL) {
    errno = static_cast<int>(-ret);
    return -1;
  }
  return ret;
}
}  // namespace detail

// syscall(2) with libc's return convention (-1 and errno), arguments of any
// integer or pointer type.
template <typename... Args>
inline long raw_syscall(long number, Args... args) {
  static_assert(sizeof...(Args) <= 6, "at most six system call arguments");
  long a[6] = {detail::syscall_arg(args)...};
  return detail::raw_syscall6(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}

}  // namespace smcr::sys
