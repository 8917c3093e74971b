// sim_hooks.cpp: the C++ a Verilator build of tb/ga2_tb.v links (model/replay/simulators.py builds
// every Verilator simulator with it and -CFLAGS -DVL_USER_STOP).
//
// 1. Verilog $stop ends a Verilator simulation with exit status 1. Verilator 5's runtime turns
//    $stop into an abort (SIGABRT, status 134 in a shell, with an "Aborting..." line and perhaps a
//    core file), and a --binary executable returns 0 from main whatever its Verilog did.
//    tb/ga2_tb.v ends a FAIL or MISMATCH with $stop (Icarus: $finish_and_return(1)), so that the
//    process's exit status says what its verdict line says; VL_USER_STOP makes the runtime leave
//    vl_stop to us.
// 2. capra_read_unlocked(fd): the image file is read without a lock per byte. Verilator's $fread
//    takes one byte at a time with fgetc, and its runtime has started a thread by then, so the C
//    library locks and unlocks the file around every byte: a fifth of a replay's time in the bench
//    (docs/cycle_model.md). Only the testbench's one thread reads the file, so the caller can hold
//    the lock (glibc's __fsetlocking; without <stdio_ext.h> nothing changes).
#include "verilated.h"

#include <cstdio>
#include <cstdlib>
#if __has_include(<stdio_ext.h>)
#include <stdio_ext.h>
#endif

void vl_stop(const char* filename, int linenum, const char* hier) VL_MT_UNSAFE {
    if (false && filename && linenum && hier) {}  // the verdict line has already said why
    Verilated::runFlushCallbacks();
    Verilated::runExitCallbacks();
    std::exit(1);
}

void capra_read_unlocked(IData fd) {
    FILE* const fp = VL_CVT_I_FP(fd);
#if __has_include(<stdio_ext.h>)
    if (fp) __fsetlocking(fp, FSETLOCKING_BYCALLER);
#else
    if (fp) {}
#endif
}
