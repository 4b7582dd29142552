// Unguessable names: 128 bits from the kernel's CSPRNG as 32 hex digits, for session ids,
// shared-memory segment handles and segment names (session_table.cc, shm_transport.cc,
// shm_batch.cc).
#ifndef TIERGYM_ENV_SERVER_RANDOM_ID_H_
#define TIERGYM_ENV_SERVER_RANDOM_ID_H_

#include <sys/random.h>
#include <sys/types.h>

#include <cstddef>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/string_view.h"

namespace tiergym::env {

inline std::string RandomHex128() {
  char bytes[16];
  size_t got = 0;
  while (got < sizeof bytes) {  // getrandom blocks until the pool is ready; EINTR retries
    const ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  return absl::BytesToHexString(absl::string_view(bytes, sizeof bytes));
}

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_SERVER_RANDOM_ID_H_
