`timescale 1ns/1ps
`default_nettype none
`include "ga2_cfg.vh"
// ga2_tb: replays every program of an image on GA2 and compares the final external memory, the
// scratchpad words each program wrote and the seven cycle counters with what the Python machine
// model predicted (model/replay/image.py writes the image; docs/replay.md describes it).
//
// Lines: one 32-bit word per line, every line exactly eight lowercase hex digits and a line feed
// (9 bytes). The file is read raw, CHUNK lines at a time ($fread; a Verilator build reads the same
// bytes in one fread a chunk, tb/sim_hooks.cpp), so Icarus and Verilator see the same bytes (a NUL
// is a byte like any other); any other byte (a NUL, a space, a carriage return, a capital letter,
// a ninth digit) is a FAIL naming the line, the byte and its value.
//
// Two forms, told apart by the first word:
//   with a header (what model/replay/image.py writes, checked by CRC-32):
//     IMG_MAGIC, programs, words in the image (header included), CRC-32 of those three,
//     then the records, each ending in the CRC-32 of every word of the image before it;
//   without one (the book's chapter listing): the number of programs (1..65535, any first word
//     but IMG_MAGIC), then the records, each as record(code, ext) returns it (its last word, the
//     CRC slot, is not checked). The records are checked structurally and must end exactly at
//     the end of the file: no word more, no word less.
//   A record: REC_MAGIC, n_code, n_init, n_xrun, n_xval, n_srun, n_sval,
//             code[n_code], init[n_init], xrun[n_xrun], xval[n_xval], srun[n_srun], sval[n_sval],
//             counters[7] (c0..c4, h_unit, h_sync), CRC slot.
// A run is two words, a first address and a length (>= 1): n_xrun and n_srun count words, so they
// are even. The runs of a list ascend without overlapping, and their values follow in address order. xrun/xval are the
// external words the program changes (every other word must keep its initial value: init, then
// zeros); srun/sval are the scratchpad words it writes (the scratchpad is never cleared, so the
// words it does not write hold whatever came before and are not compared).
// CRC-32 is zlib's (IEEE 802.3, reflected), over each word as four bytes, least significant first.
//
// Everything is bounded: an image holds at most MAXWORDS lines (default 2^20, a 9 MiB file; a
// header's word count must be within it), the reader reads no more than that and then requires
// the end of the file, so an endless or over-long file (or a directory) is a named FAIL, never a
// hang; every program runs under the WATCHDOG cycle bound. The whole image is read and checked
// (sizes, runs, CRCs) before the first program runs.
//
// Per program: under reset, the code and a HALT go into GA2's instruction memory through its load
// port (so the code never runs into what an earlier program left there; a word the memory already
// holds from an earlier program is not written again, block RAM keeps its words through reset) and
// the external memory is set to the program's initial image (only the words that differ from the
// last program's final memory are written). The testbench logs every word the chip writes to the external memory; after
// the HALT it compares the logged words and the words the program should have changed (together,
// every word that can differ from its initial value; a program that writes more than LOG_MAX
// beats is compared word by word over all EXTW words instead), the scratchpad words the record
// lists and the seven counters.
//
// Verdict: exactly one line, PASS / FAIL (an unreadable or malformed image, a bad plusarg, a
// program that does not halt, or halts with a fault status: an illegal instruction, a word past the
// memory, an error answer) / MISMATCH (a word or a counter,
// named with both values; the lowest differing address of a memory). Exit status: 0 after PASS,
// 1 after FAIL or MISMATCH (Icarus: $finish_and_return(1); Verilator: $stop, which model/replay/simulators.py's
// build (tb/sim_hooks.cpp, -DVL_USER_STOP) turns into exit(1); a Verilator build without it
// aborts there instead, status 134, still not 0).
//
// Plusargs: +PROG=<file> (default out/ga2_programs.hex, relative to the working directory; at most
// PATH_MAX characters, a longer one is a FAIL), +LATENCY=<cycles> (the external memory's
// latency, tb/extmem_rw.v: decimal digits only, 0..30, default 4 = the default configuration's ext_latency;
// model/replay/simulators.py always passes the active configuration's, so one build serves every latency). A
// +WATCHDOG=<cycles> (the most cycles a program may run before it is a FAIL: decimal digits,
// 1..999999999, default the WATCHDOG define, 2000000). A +LATENCY or +WATCHDOG that is empty, not a
// decimal number, out of range or without '=' is a FAIL naming it. +STALL=<percent>, 0..90, and
// +SEED=<number>, 0..999999999 (default 0 and 1): the memory's channels stall that percentage of
// cycles on the seeded schedule of tb/extmem_rw.v (capra.dma.StallSchedule), checked as strictly.
// +TIMELINE prints every event of the timeline (see below).
// Defines: EXTW, DUMP (prints each program's counters), WATCHDOG, MAXWORDS, WAVES (out/ga2.vcd).
//
// Timing: the clock toggles every 5 ns (rising edges at 5, 15, ...; in Verilator the build's main,
// tb/ga2_tb_main.cpp, toggles it, an input of the testbench there); the testbench itself waits
// only with delays, a period at a time (at falling edges, where nothing of the chip changes), and
// looks at `halted` every POLL cycles (a halted chip stays halted until reset, and the watchdog is
// checked at exactly its bound), so a running program costs it nothing per cycle.
`ifdef VERILATOR
module ga2_tb (
    input wire clk  // tb/ga2_tb_main.cpp toggles it every PERIOD / 2
);
`else
module ga2_tb;
`endif
`ifndef EXTW
    `define EXTW 8192
`endif
`ifndef WATCHDOG
    `define WATCHDOG 2000000
`endif
`ifndef MAXWORDS
    `define MAXWORDS 1048576
`endif
    localparam integer EXTW       = `EXTW;
    localparam integer WATCHDOG   = `WATCHDOG;     // +WATCHDOG when it is not given
    localparam integer WATCHDOG_MAX = 999_999_999;  // the most +WATCHDOG takes (nine digits)
    localparam integer MAXWORDS   = `MAXWORDS;
    localparam integer LATENCY    = 4;             // +LATENCY when it is not given
    localparam integer STALL_MAX  = 90;            // the most +STALL takes (percent; capra.config.STALL_MAX)
    `include "ga2_defs.vh"
    localparam integer IMEM_WORDS = 4 * GA2_IMEM_INSTRS;
    localparam integer SPW        = GA2_SRAM_WORDS;
    localparam integer SAW        = GA2_SRAM_AW;
    localparam integer EWORDS     = `GA2_EXT_WORDS_D;  // words of an external request
    localparam integer XAW        = (EXTW > 1) ? $clog2(EXTW) : 1;  // extmem_rw's address bits
    localparam integer MAX_PROGS  = 65535;
    localparam integer PATH_MAX   = 4096;          // characters of +PROG (Linux's PATH_MAX; see model/replay/simulators.py)
    localparam integer PATH_SHOWN = 200;           // characters of it a message shows (its end)
    localparam integer ARG_MAX    = 40;            // characters of a numeric plusarg's value
    localparam integer CHUNK      = 4096;          // lines per $fread
    localparam integer LOG_MAX    = 4096;          // external write beats logged per program
    localparam integer PERIOD     = 10;            // ns per clock cycle
    localparam integer POLL       = 16;            // cycles between looks at `halted`
    localparam integer IMG_HEADER = 4;
    localparam integer REC_HEADER = 7;
    localparam integer N_COUNTERS = 7;             // c0..c4, h_unit, h_sync
    localparam integer REC_FIXED  = REC_HEADER + N_COUNTERS + 1;  // a record's words besides its lists: header, counters, CRC
    localparam [31:0] IMG_MAGIC   = 32'h4741_3204;   // "GA2", format 4
    localparam [31:0] REC_MAGIC   = 32'h5245_4321;   // "REC!"
    localparam [31:0] CRC_POLY    = 32'hEDB8_8320;   // CRC-32, reflected

`ifndef VERILATOR
    reg clk = 1'b0;
    always #(PERIOD / 2) clk = ~clk;  // the clock of a testbench: a blocking toggle is the plain way to write it
`endif

    wire        halted, illegal;
    wire [2:0]  status;
    wire [9:0]  status_pc;
    wire [31:0] c0, c1, c2, c3, c4, h_unit, h_sync;
    wire        wr_en;
    /* verilator lint_off UNUSEDSIGNAL */
    wire [31:0] wr_addr;  // the log keeps the XAW bits that address the memory
    /* verilator lint_on UNUSEDSIGNAL */
    wire [EWORDS-1:0] wr_mask;
    // The chip's inputs come from registers that take, at each rising edge, what the initial block
    // set (rst_d, ...) in the falling edge before: a clocked signal, so a simulator evaluates the logic
    // behind them with the rest of the clocked logic rather than again whenever the testbench wakes.
    reg         rst = 1'b1, rst_d = 1'b1;
    reg         imem_we = 1'b0, imem_we_d = 1'b0;
    reg  [11:0] imem_addr = 12'd0, imem_addr_d = 12'd0;
    reg  [31:0] imem_wdata = 32'd0, imem_wdata_d = 32'd0;
    reg  [4:0]  latency = LATENCY[4:0], latency_d = LATENCY[4:0];
    reg  [6:0]  stall_pct = 7'd0, stall_d = 7'd0;
    reg  [31:0] stall_seed = 32'd1, seed_d = 32'd1;
    always @(posedge clk) begin
        rst <= rst_d;
        imem_we <= imem_we_d;
        imem_addr <= imem_addr_d;
        imem_wdata <= imem_wdata_d;
        latency <= latency_d;
        stall_pct <= stall_d;
        stall_seed <= seed_d;
    end

    ga2_sys #(.EXTW(EXTW)) u_sys (
        .clk(clk), .rst(rst), .latency(latency), .stall_pct(stall_pct), .stall_seed(stall_seed), .imem_we(imem_we), .imem_addr(imem_addr), .imem_wdata(imem_wdata),
        .halted(halted), .illegal(illegal), .status(status), .status_pc(status_pc),
        .c0(c0), .c1(c1), .c2(c2), .c3(c3), .c4(c4), .h_unit(h_unit), .h_sync(h_sync), .wr_en(wr_en), .wr_addr(wr_addr), .wr_mask(wr_mask)
    );

`ifdef WAVES
    // a waveform of the chip (Icarus): make waves
    initial begin
        $dumpfile("out/ga2.vcd");
        $dumpvars(0, u_sys.u_ga2);
    end
`endif

    // the timeline, one line per event while a program runs (the machine model's Event, in the
    // cycles c0 counts), with +TIMELINE:  EVENT <program> <cycle> go <pc> | done <pc> | setup | end
    //   go     the sequencer takes the instruction at pc      done   a compute unit's last cycle
    //   setup  a transfer takes its descriptor                 end    its last cycle in flight
    // A run-time choice (replay.timeline), so one build serves both; without it the testbench
    // looks at one register per cycle here.
    reg timeline;
    initial timeline = $test$plusargs("TIMELINE");
    always @(posedge clk) begin
        if (timeline && !rst && !halted) begin
            if (u_sys.u_ga2.legal_go) $display("EVENT %0d %0d go %0d", p, c0, u_sys.u_ga2.pc);
            if (u_sys.u_ga2.mv_busy && u_sys.u_ga2.mv_done) $display("EVENT %0d %0d done %0d", p, c0, u_sys.u_ga2.mv_done_pc);
            if (u_sys.u_ga2.sm_busy && u_sys.u_ga2.sm_done) $display("EVENT %0d %0d done %0d", p, c0, u_sys.u_ga2.sm_pc);
            // a transfer's setup cycle: R_SETUP, or a gather's first descriptor read
            if (u_sys.u_ga2.u_dma.state == u_sys.u_ga2.u_dma.R_SETUP
                || (u_sys.u_ga2.u_dma.state == u_sys.u_ga2.u_dma.R_DESC && u_sys.u_ga2.u_dma.g_first))
                $display("EVENT %0d %0d setup", p, c0);
            if (u_sys.u_ga2.u_dma.ends) $display("EVENT %0d %0d end", p, c0);
        end
    end

    // ---- the external writes of a program ---------------------------------------------------
    // Every write the memory does (tb/extmem_rw.v: the words wr_mask names, from wr_addr, within its
    // XAW address bits): its first address and mask, reset or not (the memory does them either
    // way). Emptied at the rising edge after the testbench sets wlog_clear (at the start of each
    // program's reset); past LOG_MAX beats only counted.
    reg [XAW-1:0]    wlog_addr [0:LOG_MAX-1];
    reg [EWORDS-1:0] wlog_mask [0:LOG_MAX-1];
    integer          wlog_n;
    reg              wlog_clear = 1'b1;
    always @(posedge clk) begin
        if (wlog_clear) begin
            wlog_n <= 0;
        end else if (wr_en) begin
            if (wlog_n < LOG_MAX) begin
                wlog_addr[wlog_n] <= wr_addr[XAW-1:0];
                wlog_mask[wlog_n] <= wr_mask;
            end
            wlog_n <= wlog_n + 1;
        end
    end

`ifdef VERILATOR
`systemc_header
// $fread's bytes into `chunk`, as many lines as it holds (tb/sim_hooks.cpp)
IData capra_fread_lines(IData fd, EData* lines, IData count);
template <std::size_t N> IData capra_fread(IData fd, VlUnpacked<VlWide<3>, N>& chunk) {
    return capra_fread_lines(fd, &chunk[0][0], N);
}
`verilog
`endif
    reg [31:0] img [0:MAXWORDS-1];
    reg [31:0] ext_want [0:EXTW-1];  // what the external memory must hold after the program
    reg [31:0] imem_has [0:IMEM_WORDS-1];  // the instruction memory's words 0 .. imem_len-1 (as loaded)
    reg [31:0] crc_table [0:255];    // the byte table; crc_t1..3: the next bytes' (slicing by four)
    reg [31:0] crc_t1 [0:255];
    reg [31:0] crc_t2 [0:255];
    reg [31:0] crc_t3 [0:255];
    /* verilator lint_off UNDRIVEN */  // (a Verilator build fills it in C++: capra_fread)
    reg [71:0] chunk [0:CHUNK-1];    // lines as read, the first byte in bits 71:64
    /* verilator lint_on UNDRIVEN */
    reg [8*(PATH_MAX+1)-1:0] path;   // one character more than allowed: a longer path shows up there
    reg [8*PATH_SHOWN-1:0]   shown;  // the path for messages: its end, from "..." when it is longer
    reg [8*(ARG_MAX+1)-1:0]  arg;    // a numeric plusarg's text (one character more, as for the path)
    integer i, j, p, ptr, n_prog, n_words, n_code, n_init, n_xrun, n_xval, n_srun, n_sval, rec_len;
    integer at_code, at_init, at_xrun, at_xval, at_srun, at_sval, at_cnt;
    integer bad, fd, nread, k, nbytes, first, len, run_end, vals, lat, watchdog, elapsed, step, seed;
    /* verilator lint_off UNUSEDSIGNAL */
    integer stall;  // 0..STALL_MAX, checked: its seven low bits are the rate
    /* verilator lint_on UNUSEDSIGNAL */
    integer buf_n, buf_at, buf_part, buf_eof;  // the chunk: whole lines in it, the next one, bytes past them, file ended
    reg     headed;                 // the image has a header (and CRCs)
    integer prev_init, wlog_len, miss_at, word_at, imem_len;
    reg [63:0] digits;              // one line of the image: 8 hex digits (bits 63:56 the first) ...
    reg [7:0]  lf;                  // ... and a line feed
    reg [7:0]  ch;
    reg [4:0]  hex_of [0:255];
    reg [31:0] value, crc, got, want, total_cycles, miss_want, miss_got;
    reg [31:0] got_c [0:N_COUNTERS-1];
    reg [XAW-1:0] wa;

    // ---- CRC-32 ------------------------------------------------------------------------------
    // Four bytes at once ("slicing by four"): crc_t<k>[b] is the CRC register after byte b and k
    // zero bytes, so a word takes four lookups that do not wait for one another.
    task crc_init_table;
        reg [31:0] t;
        integer b, n;
        begin
            for (n = 0; n < 256; n = n + 1) begin
                t = n;
                for (b = 0; b < 8; b = b + 1) t = t[0] ? ((t >> 1) ^ CRC_POLY) : (t >> 1);
                crc_table[n] = t;
            end
            for (n = 0; n < 256; n = n + 1) crc_t1[n] = crc_table[crc_table[n][7:0]] ^ {8'd0, crc_table[n][31:8]};
            for (n = 0; n < 256; n = n + 1) crc_t2[n] = crc_table[crc_t1[n][7:0]] ^ {8'd0, crc_t1[n][31:8]};
            for (n = 0; n < 256; n = n + 1) crc_t3[n] = crc_table[crc_t2[n][7:0]] ^ {8'd0, crc_t2[n][31:8]};
        end
    endtask

    // crc is the running register (all ones at the start); the CRC of the words so far is ~crc
    task crc_word(input [31:0] w);
        begin
            crc = crc ^ w;
            crc = crc_t3[crc[7:0]] ^ crc_t2[crc[15:8]] ^ crc_t1[crc[23:16]] ^ crc_table[crc[31:24]];
        end
    endtask

    // ---- reading the image ---------------------------------------------------------------------
    // The next CHUNK lines of the file into `chunk`, when the lines read before are used up.
    task refill;
        begin
            if (buf_at == buf_n && buf_part == 0 && buf_eof == 0) begin
`ifdef VERILATOR
                nbytes = $c32("capra_fread(", fd, ", ", chunk, ")");
`else
                nbytes = $fread(chunk, fd, 0, CHUNK);
`endif
                if (nbytes < 0) nbytes = 0;
                buf_n = nbytes / 9;
                buf_part = nbytes % 9;
                buf_at = 0;
                buf_eof = (nbytes < 9 * CHUNK) ? 1 : 0;
            end
        end
    endtask

    // hex_of[b]: bit 4 set when byte b is a lowercase hex digit, bits 3:0 its value
    task hex_init_table;
        integer n;
        begin
            for (n = 0; n < 256; n = n + 1) hex_of[n] = 5'd0;
            for (n = 0; n < 10; n = n + 1) hex_of[48 + n] = {1'b1, n[3:0]};
            for (n = 0; n < 6; n = n + 1) hex_of[97 + n] = {1'b1, n[3:0] + 4'd10};
        end
    endtask

    // Line nread + 1 into value: eight lowercase hex digits and a line feed, else FAIL. The line's
    // nine bytes are checked together (a table lookup per byte: the cheapest test in Icarus); they
    // are looked at one by one only to name the first bad one.
    task read_word;
        begin
            if (buf_at == buf_n) refill;
            if (buf_at == buf_n) begin
                if (buf_part > 0)
                    $display("FAIL: truncated image %0s: it ends inside line %0d, after byte %0d", shown,
                             nread + 1, buf_part);
                else if (nread == 0)
                    $display("FAIL: cannot read the image %0s: no byte could be read (an empty file or a directory)",
                             shown);
                else
                    $display("FAIL: truncated image %0s: it ends after line %0d, its header counts %0d lines",
                             shown, nread, n_words);
                bad = 1;
            end else begin
                {digits, lf} = chunk[buf_at];  // (64 bits and 8: Icarus loads a wider value far more slowly)
                buf_at = buf_at + 1;
                if (hex_of[digits[63:56]][4] & hex_of[digits[55:48]][4] & hex_of[digits[47:40]][4]
                    & hex_of[digits[39:32]][4] & hex_of[digits[31:24]][4] & hex_of[digits[23:16]][4]
                    & hex_of[digits[15:8]][4] & hex_of[digits[7:0]][4] & (lf == 8'h0a)) begin
                    value = {hex_of[digits[63:56]][3:0], hex_of[digits[55:48]][3:0], hex_of[digits[47:40]][3:0],
                             hex_of[digits[39:32]][3:0], hex_of[digits[31:24]][3:0], hex_of[digits[23:16]][3:0],
                             hex_of[digits[15:8]][3:0], hex_of[digits[7:0]][3:0]};
                end else begin
                    bad = 1;
                    for (k = 1; k <= 8 && bad == 1; k = k + 1) begin
                        ch = digits[64 - 8*k +: 8];
                        if (hex_of[ch][4] == 1'b0) begin
                            $display("FAIL: malformed image %0s: line %0d byte %0d is 0x%h, not a lowercase hex digit (a line is 8 of them and a line feed)",
                                     shown, nread + 1, k, ch);
                            bad = 2;
                        end
                    end
                    if (bad == 1)
                        $display("FAIL: malformed image %0s: line %0d byte 9 is 0x%h, not the line feed after 8 hex digits",
                                 shown, nread + 1, lf);
                end
            end
        end
    endtask

    // Line 1 chooses the form: the image magic, or a program count (an image without a header,
    // read to the end of the file, at most MAXWORDS lines).
    task check_first_word;
        begin
            if (img[0] === IMG_MAGIC) begin
                headed = 1'b1;
                n_words = IMG_HEADER;  // until the header says how many
            end else if (img[0] >= 32'd1 && img[0] <= MAX_PROGS) begin
                headed = 1'b0;
                n_prog = img[0];
                n_words = MAXWORDS;
            end else begin
                $display("FAIL: malformed image %0s: line 1 is %h, not the image magic %h (an image with a header) nor a program count 1..%0d (an image without a header)",
                         shown, img[0], IMG_MAGIC, MAX_PROGS);
                bad = 1;
            end
        end
    endtask

    // The header as its words arrive: a program count, a word count within MAXWORDS, its CRC.
    task check_header_word;
        begin
            if (nread == 2 && (img[1] < 32'd1 || img[1] > MAX_PROGS)) begin
                $display("FAIL: malformed image %0s: the program count %0d is not within 1..%0d", shown, img[1], MAX_PROGS);
                bad = 1;
            end else if (nread == 3 && (img[2] < IMG_HEADER + REC_FIXED * img[1] || img[2] > MAXWORDS)) begin
                $display("FAIL: malformed image %0s: the header counts %0d words, not within %0d..MAXWORDS=%0d for %0d programs",
                         shown, img[2], IMG_HEADER + REC_FIXED * img[1], MAXWORDS, img[1]);
                bad = 1;
            end else if (nread == 3) begin
                n_prog = img[1];
                n_words = img[2];
            end else if (nread == 4) begin
                crc = 32'hFFFF_FFFF;
                for (i = 0; i < 3; i = i + 1) crc_word(img[i]);
                if (img[3] !== ~crc) begin
                    $display("FAIL: malformed image %0s: header CRC-32 mismatch (line 4 says %h, lines 1-3 give %h)",
                             shown, img[3], ~crc);
                    bad = 1;
                end
                crc_word(img[3]);
            end
        end
    endtask

    // The whole file into img[0 .. n_words-1]: with a header, the lines it counts and then the end
    // of the file; without, every line to the end of the file, at most MAXWORDS.
    task read_image;
        begin
            nread = 0;
            headed = 1'b1;
            n_words = 1;  // until line 1 says which form
            buf_n = 0;
            buf_at = 0;
            buf_part = 0;
            buf_eof = 0;
            fd = $fopen(path, "r");
            if (fd == 0) begin
                $display("FAIL: cannot open the image %0s", shown);
                bad = 1;
            end
            while (bad == 0 && nread < n_words && (headed || buf_at < buf_n || buf_part > 0)) begin
                read_word;
                if (bad == 0) begin
                    img[nread] = value;
                    nread = nread + 1;
                    if (nread == 1) check_first_word;
                    else if (headed && nread <= IMG_HEADER) check_header_word;
                end
                if (bad == 0 && !headed && buf_at == buf_n) refill;  // so that the loop sees whether bytes remain
            end
            if (bad == 0) begin
                if (buf_at == buf_n) refill;
                if (buf_at < buf_n || buf_part > 0) begin
                    if (headed)
                        $display("FAIL: malformed image %0s: the file goes on after the %0d lines its header counts",
                                 shown, n_words);
                    else
                        $display("FAIL: malformed image %0s: the file goes on after MAXWORDS=%0d lines", shown,
                                 MAXWORDS);
                    bad = 1;
                end
                n_words = nread;
            end
            if (fd != 0) $fclose(fd);
        end
    endtask

    // ---- checking the records (all of them, before anything runs) ---------------------------------
    // The sizes of the record at ptr, and where its parts start.
    task record_layout;
        begin
            n_code = img[ptr + 1];
            n_init = img[ptr + 2];
            n_xrun = img[ptr + 3];
            n_xval = img[ptr + 4];
            n_srun = img[ptr + 5];
            n_sval = img[ptr + 6];
            at_code = ptr + REC_HEADER;
            at_init = at_code + n_code;
            at_xrun = at_init + n_init;
            at_xval = at_xrun + n_xrun;
            at_srun = at_xval + n_xval;
            at_sval = at_srun + n_srun;
            at_cnt  = at_sval + n_sval;
            rec_len = REC_FIXED + n_code + n_init + n_xrun + n_xval + n_srun + n_sval;
        end
    endtask

    // the run whose two words are at `at`
    task run_at(input integer at);
        begin
            first = img[at];
            len = img[at + 1];
        end
    endtask

    // n run words at `first_at`, over an address space of `limit` words, must ascend without overlapping
    // and cover `want_vals` words in all.
    task check_runs(input integer first_at, input integer n, input integer limit, input integer want_vals,
                    input [8*10:1] what);
        begin
            run_end = 0;
            vals = 0;
            if (n % 2 != 0) begin
                $display("FAIL: malformed image: program %0d %0s runs are %0d words, not pairs of first address and length",
                         p, what, n);
                bad = 1;
            end
            for (j = 0; j < n && bad == 0; j = j + 2) begin
                run_at(first_at + j);
                // (as integers: a word of 2^31 or more is negative, and fails the first two tests)
                if (len < 1 || first < run_end || first >= limit || len > limit - first) begin
                    $display("FAIL: malformed image: program %0d %0s run %0d (first %0d, %0d words) is empty, overlaps the run before or passes word %0d",
                             p, what, j / 2, first, len, limit - 1);
                    bad = 1;
                end
                run_end = first + len;
                vals = vals + len;
            end
            if (bad == 0 && vals != want_vals) begin
                $display("FAIL: malformed image: program %0d %0s runs cover %0d words, the record has %0d values",
                         p, what, vals, want_vals);
                bad = 1;
            end
        end
    endtask

    task check_records;
        begin
            ptr = headed ? IMG_HEADER : 1;
            for (p = 0; p < n_prog && bad == 0; p = p + 1) begin
                if (ptr + REC_HEADER > n_words) begin
                    if (headed)
                        $display("FAIL: malformed image: program %0d of %0d starts at line %0d, past the %0d lines the header counts",
                                 p, n_prog, ptr + 1, n_words);
                    else
                        $display("FAIL: truncated image: program %0d of %0d starts at line %0d, past the last line of the file (%0d)",
                                 p, n_prog, ptr + 1, n_words);
                    bad = 1;
                end else if (img[ptr] !== REC_MAGIC) begin
                    $display("FAIL: malformed image: program %0d record does not start with the record magic (line %0d)",
                             p, ptr + 1);
                    bad = 1;
                end else if (img[ptr + 1] > IMEM_WORDS || img[ptr + 1] % 4 != 0 || img[ptr + 2] > EXTW
                             || img[ptr + 3] > EXTW || img[ptr + 4] > EXTW || img[ptr + 5] > SPW
                             || img[ptr + 6] > SPW) begin
                    $display("FAIL: malformed image: program %0d sizes (code %0d, init %0d, external runs %0d and words %0d, scratchpad runs %0d and words %0d) do not fit (IMEM %0d in whole instructions, EXTW %0d, scratchpad %0d)",
                             p, img[ptr + 1], img[ptr + 2], img[ptr + 3], img[ptr + 4], img[ptr + 5], img[ptr + 6],
                             IMEM_WORDS, EXTW, SPW);
                    bad = 1;
                end else begin
                    record_layout;
                    if (ptr + rec_len > n_words) begin
                        if (headed)
                            $display("FAIL: malformed image: program %0d record ends at line %0d, past the %0d lines the header counts",
                                     p, ptr + rec_len, n_words);
                        else
                            $display("FAIL: truncated image: program %0d record ends at line %0d, past the last line of the file (%0d)",
                                     p, ptr + rec_len, n_words);
                        bad = 1;
                    end
                end
                if (bad == 0) check_runs(at_xrun, n_xrun, EXTW, n_xval, "external");
                if (bad == 0) check_runs(at_srun, n_srun, SPW, n_sval, "scratchpad");
                if (bad == 0 && headed) begin
                    for (i = ptr; i < ptr + rec_len - 1; i = i + 1) crc_word(img[i]);
                    if (img[ptr + rec_len - 1] !== ~crc) begin
                        $display("FAIL: program %0d: CRC-32 mismatch (line %0d says %h, the image before it gives %h): the image was altered",
                                 p, ptr + rec_len, img[ptr + rec_len - 1], ~crc);
                        bad = 1;
                    end
                    crc_word(img[ptr + rec_len - 1]);
                end
                if (bad == 0) ptr = ptr + rec_len;
            end
            if (bad == 0 && ptr != n_words) begin
                $display("FAIL: malformed image: lines %0d..%0d follow the last of the %0d programs", ptr + 1, n_words,
                         n_prog);
                bad = 1;
            end
        end
    endtask

    // ---- the scratchpad, bank by bank (rtl/sram.v: lane a[1:0], group a[SAW-1:SAW-2], row in between)
    // what the instruction the sequencer holds waits for, at the watchdog (rtl/ga2.v's stall, hold_u,
    // hold_s, in the order the counters count them)
    function [8*40-1:0] hang_name(input stalled, input held_unit, input held_sync);
        if (stalled)        hang_name = "waits for the DMA";
        else if (held_unit) hang_name = "waits for its engine";
        else if (held_sync) hang_name = "waits for the other engine";
        else                hang_name = "is issued every cycle (no wait)";
    endfunction

    // the name of counter i of a record (rtl/ga2.v)
    function [8*8-1:0] counter_name(input integer index);
        case (index)
            5:       counter_name = "h_unit";
            6:       counter_name = "h_sync";
            default: counter_name = {48'd0, "c", 8'd48 + index[7:0]};
        endcase
    endfunction

    // the name of a fault status (rtl/ga2.v)
    function [8*16-1:0] status_name(input [2:0] st);
        case (st)
            ST_ILLEGAL:      status_name = "ILLEGAL";
            ST_EXT_ADDR:     status_name = "EXT_ADDR";
            ST_EXT_RESP:     status_name = "EXT_RESP";
            ST_EXT_PROTOCOL: status_name = "EXT_PROTOCOL";
            default:         status_name = "UNKNOWN";
        endcase
    endfunction

    function [31:0] sp_word(input [SAW-1:0] a);
        begin
            case ({a[SAW-1:SAW-2], a[1:0]})
                4'd0:    sp_word = u_sys.u_ga2.u_sram.g_bank[0].u_ram.mem[a[SAW-3:2]];
                4'd1:    sp_word = u_sys.u_ga2.u_sram.g_bank[1].u_ram.mem[a[SAW-3:2]];
                4'd2:    sp_word = u_sys.u_ga2.u_sram.g_bank[2].u_ram.mem[a[SAW-3:2]];
                4'd3:    sp_word = u_sys.u_ga2.u_sram.g_bank[3].u_ram.mem[a[SAW-3:2]];
                4'd4:    sp_word = u_sys.u_ga2.u_sram.g_bank[4].u_ram.mem[a[SAW-3:2]];
                4'd5:    sp_word = u_sys.u_ga2.u_sram.g_bank[5].u_ram.mem[a[SAW-3:2]];
                4'd6:    sp_word = u_sys.u_ga2.u_sram.g_bank[6].u_ram.mem[a[SAW-3:2]];
                4'd7:    sp_word = u_sys.u_ga2.u_sram.g_bank[7].u_ram.mem[a[SAW-3:2]];
                4'd8:    sp_word = u_sys.u_ga2.u_sram.g_bank[8].u_ram.mem[a[SAW-3:2]];
                4'd9:    sp_word = u_sys.u_ga2.u_sram.g_bank[9].u_ram.mem[a[SAW-3:2]];
                4'd10:   sp_word = u_sys.u_ga2.u_sram.g_bank[10].u_ram.mem[a[SAW-3:2]];
                4'd11:   sp_word = u_sys.u_ga2.u_sram.g_bank[11].u_ram.mem[a[SAW-3:2]];
                4'd12:   sp_word = u_sys.u_ga2.u_sram.g_bank[12].u_ram.mem[a[SAW-3:2]];
                4'd13:   sp_word = u_sys.u_ga2.u_sram.g_bank[13].u_ram.mem[a[SAW-3:2]];
                4'd14:   sp_word = u_sys.u_ga2.u_sram.g_bank[14].u_ram.mem[a[SAW-3:2]];
                default: sp_word = u_sys.u_ga2.u_sram.g_bank[15].u_ram.mem[a[SAW-3:2]];
            endcase
        end
    endfunction

    // ---- the external memory between programs -------------------------------------------------
    // Before program p (the record at ptr): the memory and ext_want hold program p-1's final and
    // expected images, which differ from its initial image (the first prev_init words of the record
    // before, then zeros) only at the words it wrote (the log, or every word when it overflowed)
    // and at its expected changes. Those are set back to zero, then p's initial image is written
    // over the first max(n_init, prev_init) words and its expected changes go into ext_want.
    task set_word(input [XAW-1:0] a, input [31:0] w);
        begin
            u_sys.u_ext.mem[a] = w;
            ext_want[a] = w;
        end
    endtask

    task expected_changes(input clear);  // the record's runs: ext_want its values, or both zero
        begin
            vals = at_xval;
            for (j = 0; j < n_xrun; j = j + 2) begin
                run_at(at_xrun + j);
                for (i = first; i < first + len; i = i + 1) begin
                    if (clear) set_word(i[XAW-1:0], 32'd0);
                    else ext_want[i] = img[vals];
                    vals = vals + 1;
                end
            end
        end
    endtask

    task prepare_external;
        begin
            if (p == 0) begin
                for (i = 0; i < EXTW; i = i + 1) set_word(i[XAW-1:0], 32'd0);
            end else if (wlog_len > LOG_MAX) begin
                for (i = 0; i < EXTW; i = i + 1) set_word(i[XAW-1:0], 32'd0);
            end else begin
                for (k = 0; k < wlog_len; k = k + 1) begin
                    for (j = 0; j < EWORDS; j = j + 1) begin
                        wa = wlog_addr[k] + j[XAW-1:0];
                        word_at = {{(32-XAW){1'b0}}, wa};
                        if (wlog_mask[k][j] && word_at < EXTW) set_word(wa, 32'd0);
                    end
                end
            end
            if (p > 0) begin  // the record before: its expected changes, then its initial words
                ptr = ptr - rec_len;
                record_layout;
                expected_changes(1);
                ptr = ptr + rec_len;
            end
            record_layout;
            for (i = 0; i < n_init || i < prev_init; i = i + 1) set_word(i[XAW-1:0], (i < n_init) ? img[at_init + i] : 32'd0);
            expected_changes(0);
            prev_init = n_init;
        end
    endtask

    // After the HALT: every word that may differ from its initial value (the logged writes and the
    // expected changes; every word when the log overflowed), the lowest one that differs named.
    task check_word(input integer a);
        begin
            got = u_sys.u_ext.mem[a];
            if (got !== ext_want[a] && (miss_at < 0 || a < miss_at)) begin
                miss_at = a;
                miss_want = ext_want[a];
                miss_got = got;
            end
        end
    endtask

    task check_external;
        begin
            miss_at = -1;
            if (wlog_len > LOG_MAX) begin
                for (i = 0; i < EXTW; i = i + 1) check_word(i);
            end else begin
                for (k = 0; k < wlog_len; k = k + 1) begin
                    for (j = 0; j < EWORDS; j = j + 1) begin
                        wa = wlog_addr[k] + j[XAW-1:0];
                        word_at = {{(32-XAW){1'b0}}, wa};
                        if (wlog_mask[k][j] && word_at < EXTW) check_word(word_at);
                    end
                end
                for (j = 0; j < n_xrun; j = j + 2) begin
                    run_at(at_xrun + j);
                    for (i = first; i < first + len; i = i + 1) check_word(i);
                end
            end
            if (miss_at >= 0) begin
                $display("MISMATCH: program %0d external word %0d: expected %h, got %h", p, miss_at, miss_want, miss_got);
                bad = 1;
            end
        end
    endtask

    // ---- running one program and comparing ------------------------------------------------------
    task run_program;
        begin
            // under reset: the external memory directly, the code and a HALT through the
            // instruction memory's load port (a word already there, written for an earlier
            // program, is not written again: the memory keeps its words through reset)
            #(PERIOD);
            rst_d = 1'b1;
            wlog_clear = 1'b1;
            prepare_external;
            #(PERIOD);
            wlog_clear = 1'b0;  // the log is empty from this rising edge on
            for (i = 0; i < n_code + 4 && i < IMEM_WORDS; i = i + 1) begin
                value = (i < n_code) ? img[at_code + i] : 32'd0;
                if (i >= imem_len || imem_has[i] !== value) begin
                    imem_we_d = 1'b1;
                    imem_addr_d = i[11:0];
                    imem_wdata_d = value;
                    imem_has[i] = value;
                    #(PERIOD);
                end
            end
            if (n_code + 4 > imem_len) imem_len = n_code + 4;
            imem_we_d = 1'b0;
            #(3 * PERIOD);  // rtl/ga2.v reads instructions 0, 1 and 2 ahead
            rst_d = 1'b0;
            #(PERIOD);  // the chip sees it at the next rising edge: it runs from the one after
            // run: `halted` is looked at every POLL cycles and at exactly `watchdog` cycles
            elapsed = 0;
            while (!halted && elapsed < watchdog) begin
                step = (watchdog - elapsed < POLL) ? watchdog - elapsed : POLL;
                #(step * PERIOD);
                elapsed = elapsed + step;
            end
            wlog_len = wlog_n;
            if (!halted) begin
                $display("FAIL: program %0d did not halt within the watchdog bound of %0d cycles: instruction %0d %0s",
                         p, watchdog, u_sys.u_ga2.pc, hang_name(u_sys.u_ga2.stall, u_sys.u_ga2.hold_u,
                                                               u_sys.u_ga2.hold_s));
                bad = 1;
            end else if (illegal != (status == ST_ILLEGAL)) begin
                $display("FAIL: program %0d halted with illegal = %0d but status %0s", p, illegal, status_name(status));
                bad = 1;
            end else if (status != ST_OK) begin
                $display("FAIL: program %0d halted with status %0s at instruction %0d", p, status_name(status),
                         status_pc);
                bad = 1;
            end
            if (bad == 0) begin
                got_c[0] = c0;
                got_c[1] = c1;
                got_c[2] = c2;
                got_c[3] = c3;
                got_c[4] = c4;
                got_c[5] = h_unit;
                got_c[6] = h_sync;
`ifdef DUMP
                $display("COUNTERS %0d %0d %0d %0d %0d %0d", p, c0, c1, c2, c3, c4);
                $display("HOLDS %0d %0d %0d", p, h_unit, h_sync);
`endif
                total_cycles = total_cycles + c0;
                for (i = 0; i < N_COUNTERS && bad == 0; i = i + 1) begin
                    want = img[at_cnt + i];
                    if (got_c[i] !== want) begin
                        $display("MISMATCH: program %0d counter %0s: expected %0d, got %0d", p, counter_name(i), want,
                                 got_c[i]);
                        bad = 1;
                    end
                end
                if (bad == 0) check_external;
                vals = at_sval;
                for (j = 0; j < n_srun && bad == 0; j = j + 2) begin
                    run_at(at_srun + j);
                    for (i = first; i < first + len && bad == 0; i = i + 1) begin
                        got = sp_word(i[SAW-1:0]);
                        if (got !== img[vals]) begin
                            $display("MISMATCH: program %0d scratchpad word %0d: expected %h, got %h", p, i, img[vals], got);
                            bad = 1;
                        end
                        vals = vals + 1;
                    end
                end
            end
        end
    endtask

    // ---- plusargs ------------------------------------------------------------------------------
    // A numeric plusarg's text (right-aligned in `arg`, NUL bytes before it) as a decimal number:
    // digits only, at least one, else -1; a number of more than nine digits is 10^9.
    function integer decimal(input [8*(ARG_MAX+1)-1:0] text);
        integer n, n_digits, at;
        reg [7:0] b;
        reg       started, ok;
        begin
            n = 0;
            n_digits = 0;
            started = 1'b0;
            ok = 1'b1;
            for (at = ARG_MAX; at >= 0; at = at - 1) begin
                b = text[8*at +: 8];
                if (b != 8'd0 || started) begin
                    started = 1'b1;
                    if (b < "0" || b > "9") ok = 1'b0;
                    else if (n < 100_000_000) n = 10 * n + {24'd0, b - "0"};
                    else n = 1_000_000_000;
                    n_digits = n_digits + 1;
                end
            end
            decimal = (ok && n_digits > 0) ? n : -1;
        end
    endfunction

    task read_plusargs;
        begin
            path = 0;
            if (!$value$plusargs("PROG=%s", path)) path = "out/ga2_programs.hex";
            shown = path[8*PATH_SHOWN-1:0];
            if (path[8*(PATH_MAX+1)-1:8*PATH_SHOWN] != 0) shown[8*PATH_SHOWN-1 -: 24] = "...";
            if (path == 0) begin
                $display("FAIL: the +PROG path is empty");
                bad = 1;
            end else if (path[8*(PATH_MAX+1)-1 -: 8] != 8'd0) begin
                $display("FAIL: the +PROG path (ending %0s) is longer than PATH_MAX=%0d characters", shown, PATH_MAX);
                bad = 1;
            end
            arg = 0;
            lat = LATENCY;
            if (bad == 0 && $value$plusargs("LATENCY=%s", arg)) begin
                lat = decimal(arg);
                if (arg == 0) begin
                    $display("FAIL: +LATENCY= is empty: give the external memory's latency in cycles, 0..30");
                    bad = 1;
                end else if (arg[8*ARG_MAX +: 8] != 8'd0) begin
                    $display("FAIL: +LATENCY=...%0s is longer than %0d characters: not a latency, 0..30 cycles",
                             arg[8*ARG_MAX-1:0], ARG_MAX);
                    bad = 1;
                end else if (lat < 0) begin
                    $display("FAIL: +LATENCY=%0s is not a decimal number of cycles, 0..30", arg);
                    bad = 1;
                end else if (lat > 30) begin
                    $display("FAIL: +LATENCY=%0s is outside 0..30 (the chip keeps at most 32 requests waiting)", arg);
                    bad = 1;
                end
            end else if (bad == 0 && $test$plusargs("LATENCY")) begin
                $display("FAIL: a plusarg starts +LATENCY but is not +LATENCY=<cycles> (0..30)");
                bad = 1;
            end
            latency_d = lat[4:0];
            arg = 0;
            watchdog = WATCHDOG;
            if (bad == 0 && $value$plusargs("WATCHDOG=%s", arg)) begin
                watchdog = decimal(arg);
                if (arg == 0) begin
                    $display("FAIL: +WATCHDOG= is empty: give the cycles a program may run, 1..%0d", WATCHDOG_MAX);
                    bad = 1;
                end else if (arg[8*ARG_MAX +: 8] != 8'd0) begin
                    $display("FAIL: +WATCHDOG=...%0s is longer than %0d characters: not a cycle bound, 1..%0d",
                             arg[8*ARG_MAX-1:0], ARG_MAX, WATCHDOG_MAX);
                    bad = 1;
                end else if (watchdog < 0) begin
                    $display("FAIL: +WATCHDOG=%0s is not a decimal number of cycles, 1..%0d", arg, WATCHDOG_MAX);
                    bad = 1;
                end else if (watchdog < 1 || watchdog > WATCHDOG_MAX) begin
                    $display("FAIL: +WATCHDOG=%0s is outside 1..%0d", arg, WATCHDOG_MAX);
                    bad = 1;
                end
            end else if (bad == 0 && $test$plusargs("WATCHDOG")) begin
                $display("FAIL: a plusarg starts +WATCHDOG but is not +WATCHDOG=<cycles> (1..%0d)", WATCHDOG_MAX);
                bad = 1;
            end
            arg = 0;
            stall = 0;
            if (bad == 0 && $value$plusargs("STALL=%s", arg)) number_arg("STALL", 0, STALL_MAX, stall);
            else if (bad == 0 && $test$plusargs("STALL")) begin
                $display("FAIL: a plusarg starts +STALL but is not +STALL=<percent> (0..%0d)", STALL_MAX);
                bad = 1;
            end
            stall_d = stall[6:0];
            arg = 0;
            seed = 1;
            if (bad == 0 && $value$plusargs("SEED=%s", arg)) number_arg("SEED", 0, WATCHDOG_MAX, seed);
            else if (bad == 0 && $test$plusargs("SEED")) begin
                $display("FAIL: a plusarg starts +SEED but is not +SEED=<number> (0..%0d)", WATCHDOG_MAX);
                bad = 1;
            end
            seed_d = seed;
        end
    endtask

    // +NAME=<arg>: a decimal number in low..high into `value`, or a FAIL naming the plusarg
    task number_arg(input [8*8-1:0] name, input integer low, input integer high, output integer number);
        begin
            number = decimal(arg);
            if (arg == 0) begin
                $display("FAIL: +%0s= is empty: give a number, %0d..%0d", name, low, high);
                bad = 1;
            end else if (arg[8*ARG_MAX +: 8] != 8'd0) begin
                $display("FAIL: +%0s=...%0s is longer than %0d characters: not a number, %0d..%0d", name,
                         arg[8*ARG_MAX-1:0], ARG_MAX, low, high);
                bad = 1;
            end else if (number < 0) begin
                $display("FAIL: +%0s=%0s is not a decimal number, %0d..%0d", name, arg, low, high);
                bad = 1;
            end else if (number < low || number > high) begin
                $display("FAIL: +%0s=%0s is outside %0d..%0d", name, arg, low, high);
                bad = 1;
            end
        end
    endtask

    // ---- the run -------------------------------------------------------------------------------
    // Exit status 0 after PASS, 1 after FAIL or MISMATCH (see the header).
    task finish_run;
        begin
            if (bad == 0) begin
                $finish;
            end else begin
`ifdef __ICARUS__
                $finish_and_return(1);
`else
                $stop;
`endif
            end
        end
    endtask

    initial begin
        bad = 0;
        total_cycles = 32'd0;
        n_prog = 0;
        prev_init = 0;
        wlog_len = 0;
        imem_len = 0;
        rec_len = 0;
        crc_init_table;
        hex_init_table;
        read_plusargs;
        if (bad == 0) read_image;
        if (bad == 0) check_records;
        ptr = headed ? IMG_HEADER : 1;
        for (p = 0; p < n_prog && bad == 0; p = p + 1) begin
            run_program;
            ptr = ptr + rec_len;
        end
        if (bad == 0 && headed)
            $display("PASS: %0d programs match the Python reference (external memory, scratchpad, all five cycle counters and both hold counts), %0d cycles in total",
                     n_prog, total_cycles);
        else if (bad == 0)
            $display("PASS: %0d programs match the Python reference (external memory, scratchpad, all five cycle counters and both hold counts), %0d cycles in total (the image had no header, so its CRCs were not checked)",
                     n_prog, total_cycles);
        finish_run;
    end
endmodule
`default_nettype wire
