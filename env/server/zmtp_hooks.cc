// libc's accept, accept4, recv and close, redefined for the program that links this file
// so that the ZMTP guard (zmtp_guard.h) follows the connections libzmq accepts and reads.
// Linked only into programs (the `tiergym` executable, env/cli; the server's tests), never
// into a library: a definition of libc's functions in a library would replace them for
// every process that loads it (tests/layers/check_symbols.sh checks that none does).
//
// These are the calls libzmq (4.3) makes to accept and read its TCP and ipc connections,
// and to close them; defined in the executable, they are the ones the process uses (ELF
// symbol interposition). Each goes straight to the kernel as glibc's would.
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "env/server/zmtp_guard.h"

extern "C" {

// What zmtp_guard.cc looks for to tell whether the hooks are in the program.
int tiergym_zmtp_hooks_linked() { return 1; }

int accept(int fd, sockaddr* addr, socklen_t* len) {
  // accept4 with no flags: some architectures (arm64) have no accept system call.
  return tiergym::env::internal::GuardAccepted(
      static_cast<int>(::syscall(SYS_accept4, fd, addr, len, 0)));
}

int accept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
  return tiergym::env::internal::GuardAccepted(
      static_cast<int>(::syscall(SYS_accept4, fd, addr, len, flags)));
}

ssize_t recv(int fd, void* buf, size_t len, int flags) {
  return tiergym::env::internal::GuardedRecv(fd, buf, len, flags);
}

int close(int fd) {
  tiergym::env::internal::GuardClosing(fd);
  return static_cast<int>(::syscall(SYS_close, fd));
}

}  // extern "C"
