/* libphasemark.so: see phasemark.h. */
#include "profiler/phasemark.h"

#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernel_patches/abi/tiergym_mckernel.h"

static int g_use_syscall = 0;

__attribute__((constructor)) static void phasemark_init(void) {
  const char* mode = getenv("TIERGYM_PHASEMARK");
  g_use_syscall = mode != NULL && strcmp(mode, "syscall") == 0;
}

/* noinline and an empty asm keep a real function entry for the uprobe, whatever the
 * optimisation level; `used` keeps the symbol even under LTO. */
__attribute__((noinline, used, visibility("default"))) void phasemark(void) {
  if (g_use_syscall) syscall(TIERGYM_PHASEMARK_SYSCALL);
  __asm__ __volatile__("" ::: "memory");
}

__attribute__((visibility("default"))) int phasemark_uses_syscall(void) { return g_use_syscall; }
