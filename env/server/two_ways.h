// One of two ways of doing something, chosen by the time each took lately (moving
// averages): the faster, and the other after kTryOtherAfter uses, then after twice as many
// each time it stays slower (at most kTryOtherMax), so that a change of load is seen without
// paying often for a way that stays slower. The shared-memory transport's threads choose so
// how to step a batch and how to wait for the next request (shm_transport.h); the Python
// client's waits do the same (env/python/tiergym/_shm.py, _TwoWays).
//
// Thread-compatible.
#ifndef TIERGYM_ENV_SERVER_TWO_WAYS_H_
#define TIERGYM_ENV_SERVER_TWO_WAYS_H_

#include <algorithm>
#include <cstdint>

namespace tiergym::env {

class TwoWays {
 public:
  static constexpr uint64_t kTryOtherAfter = 32, kTryOtherMax = 1024;
  // The way to take now: 0 or 1 (each once first).
  int Choose() {
    if (ns_[0] == 0) return 0;
    if (ns_[1] == 0) return 1;
    trying_other_ = ++uses_ >= try_other_after_;
    return trying_other_ ? 1 - Faster() : Faster();
  }
  // The time the way chosen took.
  void Took(int way, double ns) {
    ns_[way] = ns_[way] == 0 ? std::max(ns, 1.0) : 0.875 * ns_[way] + 0.125 * std::max(ns, 1.0);
    if (!trying_other_) return;
    trying_other_ = false;
    uses_ = 0;
    try_other_after_ =
        Faster() == way ? kTryOtherAfter : std::min(2 * try_other_after_, kTryOtherMax);
  }

 private:
  [[nodiscard]] int Faster() const { return ns_[1] < ns_[0] ? 1 : 0; }
  double ns_[2] = {0, 0};
  uint64_t uses_ = 0, try_other_after_ = kTryOtherAfter;
  bool trying_other_ = false;
};

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_SERVER_TWO_WAYS_H_
