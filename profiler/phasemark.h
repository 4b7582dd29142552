/* phasemark(): mark the start of a new application phase.
 *
 * The C ABI of libphasemark.so, the same as the phasemark() system call wrapper of the
 * McKernel patches (kernel_patches/): one call, no arguments, no result. Applications
 * call it where a phase begins (before each time step, solver stage, ...) and link with
 * -lphasemark. What a call does depends on the kernel the process runs on:
 *
 *   - McKernel: it issues the system call TIERGYM_PHASEMARK_SYSCALL
 *     (kernel_patches/abi/tiergym_mckernel.h), which the patched PEBS driver appends to
 *     its records. McKernel is selected by the environment variable
 *     TIERGYM_PHASEMARK=syscall, read once when the library is loaded (the McKernel
 *     launch line sets it: `TIERGYM_PHASEMARK=syscall mcexec ./app`). A process cannot
 *     tell reliably by itself that it runs on McKernel, so the choice is explicit.
 *   - Linux (the default, or TIERGYM_PHASEMARK=anchor): it does nothing but exist. It is
 *     the anchor `tiergym-prof record` instruments with a uprobe perf event, so each call
 *     arrives as a record, in order, in the same ring buffer as the memory samples.
 *     Without a recorder attached a call costs a function call.
 *
 * Thread-safe; async-signal-safe. Phasemarks apply to the whole process.
 */
#ifndef TIERGYM_PROFILER_PHASEMARK_H_
#define TIERGYM_PROFILER_PHASEMARK_H_

#ifdef __cplusplus
extern "C" {
#endif

void phasemark(void);

/* 1 when calls issue the McKernel system call, 0 when they are uprobe anchors. */
int phasemark_uses_syscall(void);

#ifdef __cplusplus
}
#endif

#endif /* TIERGYM_PROFILER_PHASEMARK_H_ */
