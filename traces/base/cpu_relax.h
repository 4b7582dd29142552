#ifndef TIERGYM_TRACES_BASE_CPU_RELAX_H_
#define TIERGYM_TRACES_BASE_CPU_RELAX_H_

namespace tiergym {

// Tells the CPU that the caller is spinning on a memory word (x86 `pause`, Arm `yield`):
// the sibling hyperthread gets the core's resources and leaving the loop costs no memory
// order violation. Both sides of the shared-memory segment spin with it.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace tiergym

#endif  // TIERGYM_TRACES_BASE_CPU_RELAX_H_
