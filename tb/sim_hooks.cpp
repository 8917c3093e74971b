// sim_hooks.cpp: the C++ a Verilator build of tb/ga2_tb.v links (model/replay/simulators.py builds
// every Verilator simulator with it and -CFLAGS -DVL_USER_STOP).
//
// 1. Verilog $stop ends a Verilator simulation with exit status 1. Verilator 5's runtime turns
//    $stop into an abort (SIGABRT, status 134 in a shell, with an "Aborting..." line and perhaps a
//    core file), and a --binary executable returns 0 from main whatever its Verilog did.
//    tb/ga2_tb.v ends a FAIL or MISMATCH with $stop (Icarus: $finish_and_return(1)), so that the
//    process's exit status says what its verdict line says; VL_USER_STOP makes the runtime leave
//    vl_stop to us.
// 2. capra_fread_lines(fd, lines, count): what `$fread(chunk, fd, 0, count)` gives for an array of
//    72-bit lines (the same bytes, the first byte of a line in its bits 71:64, a line the file ends
//    inside filled from the top and zero below, the number of bytes read), in one fread. Verilator's
//    own $fread takes one byte at a time with fgetc, under a lock per byte once its runtime has
//    started a thread: a tenth of a replay's time in the bench (docs/cycle_model.md). Icarus reads
//    the image with its own $fread.
#include "verilated.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

void vl_stop(const char* filename, int linenum, const char* hier) VL_MT_UNSAFE {
    if (false && filename && linenum && hier) {}  // the verdict line has already said why
    Verilated::runFlushCallbacks();
    Verilated::runExitCallbacks();
    std::exit(1);
}

IData capra_fread_lines(IData fd, EData* lines, IData count) {
    constexpr std::size_t LINE = 9;  // bytes of a line: bits 71:0 in three 32-bit words
    FILE* const fp = VL_CVT_I_FP(fd);
    if (!fp) return 0;
    static std::vector<unsigned char> bytes;
    bytes.assign(LINE * count, 0);
    const std::size_t got = std::fread(bytes.data(), 1, bytes.size(), fp);
    for (std::size_t at = 0; at < (got + LINE - 1) / LINE; ++at) {
        const unsigned char* const b = &bytes[LINE * at];  // zeros past `got`
        EData* const line = &lines[3 * at];
        line[2] = b[0];
        line[1] = (EData(b[1]) << 24) | (EData(b[2]) << 16) | (EData(b[3]) << 8) | b[4];
        line[0] = (EData(b[5]) << 24) | (EData(b[6]) << 16) | (EData(b[7]) << 8) | b[8];
    }
    return static_cast<IData>(got);
}
