/* The ABI shared by the McKernel patches (kernel_patches/) and the profiler (profiler/):
 * the phasemark() system call number and the layout of the PEBS dumps that the patched
 * McKernel writes and `tiergym-prof import-mckernel` reads.
 *
 * C header (the kernel side and libphasemark are C). The kernel_patches issue owns it; the
 * patch series adds a byte-identical copy to the McKernel tree (kernel_patches/check.sh
 * verifies the copy). The dump layout constants are filled in with the patch series.
 */
#ifndef TIERGYM_MCKERNEL_ABI_H_
#define TIERGYM_MCKERNEL_ABI_H_

/* System call number of phasemark(void). Provisional until the kernel_patches series
 * verifies it against McKernel's syscall table. */
#define TIERGYM_PHASEMARK_SYSCALL 650

#endif /* TIERGYM_MCKERNEL_ABI_H_ */
