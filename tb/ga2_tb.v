`timescale 1ns/1ps
`default_nettype none
`include "ga2_cfg.vh"
// ga2_tb: replays every program of an image on GA2 and compares the final external memory, the
// scratchpad words each program wrote and the five cycle counters with what the Python machine
// model predicted (tools/ga2_progs.py writes the image; docs/replay.md describes it).
//
// Image: one 32-bit word per line, and every line exactly eight lowercase hex digits and a line
// feed (9 bytes). The testbench reads each line's 9 bytes raw ($fread into a 72-bit register, not
// $fgets/$fscanf, whose handling of a NUL or of the end of the file differs between the two), so
// Icarus and Verilator see the same bytes; any other byte (a NUL, a space, a carriage return, a
// capital letter, a ninth digit) is a FAIL naming the line, the byte and its value. Words:
//   header:      IMG_MAGIC, programs, words in the image (header included), CRC-32 of those three;
//   per program: REC_MAGIC, n_code, n_init, n_xrun, n_xval, n_srun, n_sval,
//                code[n_code], init[n_init], xrun[n_xrun], xval[n_xval], srun[n_srun], sval[n_sval],
//                counters[5], CRC-32 of every word of the image before this one.
// A run word holds a first address in bits 15:0 and a length (>= 1) in bits 31:16; the runs of a
// list ascend without overlapping, and their values follow in address order. xrun/xval are the
// external words the program changes (every other word must keep its initial value: init, then
// zeros); srun/sval are the scratchpad words it writes (the scratchpad is never cleared, so the
// words it does not write hold whatever came before and are not compared).
// CRC-32 is zlib's (IEEE 802.3, reflected), over each word as four bytes, least significant first.
//
// Everything is bounded: the header's word count must be at most MAXWORDS (default 2^20 words, a
// 9 MiB file), the reader reads that many lines and then requires the end of the file, so an
// endless or over-long file (or a directory) is a named FAIL, never a hang; every program runs
// under the WATCHDOG cycle bound. The whole image is read and checked (sizes, runs, CRCs) before
// the first program runs.
// Exactly one verdict line is printed: PASS / FAIL (an unreadable or malformed image, a program
// that does not halt or halts on an illegal instruction) / MISMATCH (a word or a counter).
// Each program's code goes into GA2's instruction memory through its load port, followed by a
// HALT (so the code never runs into what an earlier program left there).
// Plusargs: +PROG=<file> (default out/ga2_programs.hex; at most PATH_MAX characters, a longer one is
// a FAIL), +LATENCY=<cycles> (the external memory's read latency, 0..31, default 4 = the default
// configuration's ext_latency; tools/hw.py always passes the active configuration's, so one build
// serves every latency). Defines: EXTW, DUMP (prints each program's counters), WATCHDOG, MAXWORDS,
// WAVES (writes out/ga2.vcd).
module ga2_tb;
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
    localparam integer WATCHDOG   = `WATCHDOG;
    localparam integer MAXWORDS   = `MAXWORDS;
    localparam integer LATENCY    = 4;             // +LATENCY when it is not given
    `include "ga2_defs.vh"
    localparam integer IMEM_WORDS = 4 * GA2_IMEM_INSTRS;
    localparam integer SPW        = GA2_SRAM_WORDS;
    localparam integer SAW        = GA2_SRAM_AW;
    localparam integer MAX_PROGS  = 65535;
    localparam integer PATH_MAX   = 4096;          // characters of +PROG (Linux's PATH_MAX; see tools/hw.py)
    localparam integer PATH_SHOWN = 200;           // characters of it a message shows (its end)
    localparam integer IMG_HEADER = 4;
    localparam integer REC_HEADER = 7;
    localparam integer REC_FIXED  = REC_HEADER + 6;  // a record's words besides its lists: header, counters, CRC
    localparam [31:0] IMG_MAGIC   = 32'h4741_3202;   // "GA2", format 2
    localparam [31:0] REC_MAGIC   = 32'h5245_4321;   // "REC!"
    localparam [31:0] CRC_POLY    = 32'hEDB8_8320;   // CRC-32, reflected

    reg clk = 1'b0;
    reg rst = 1'b1;
    /* verilator lint_off BLKSEQ */
    always #5 clk = ~clk;  // the clock of a testbench: a blocking toggle is the plain way to write it
    /* verilator lint_on BLKSEQ */

    wire        halted, illegal;
    wire [31:0] c0, c1, c2, c3, c4;
    wire        req_valid, req_ready, req_we, rsp_valid;
    wire [15:0] req_addr;
    wire [`GA2_EXT_WORDS_D-1:0]    req_mask;
    wire [32*`GA2_EXT_WORDS_D-1:0] req_wdata, rsp_rdata;
    reg         imem_we = 1'b0;
    reg  [11:0] imem_addr = 12'd0;
    reg  [31:0] imem_wdata = 32'd0;

    ga2 u_ga2 (
        .clk(clk), .rst(rst), .imem_we(imem_we), .imem_addr(imem_addr), .imem_wdata(imem_wdata),
        .halted(halted), .illegal(illegal), .c0(c0), .c1(c1), .c2(c2), .c3(c3), .c4(c4),
        .ext_req_valid(req_valid), .ext_req_ready(req_ready), .ext_req_we(req_we), .ext_req_mask(req_mask),
        .ext_req_addr(req_addr),
        .ext_req_wdata(req_wdata), .ext_rsp_valid(rsp_valid), .ext_rsp_rdata(rsp_rdata)
    );
    reg  [4:0]  latency = LATENCY[4:0];
    extmem_rw #(.EXTW(EXTW), .WORDS(`GA2_EXT_WORDS_D)) u_ext (
        .clk(clk), .rst(rst), .latency(latency), .req_valid(req_valid), .req_ready(req_ready), .req_we(req_we),
        .req_mask(req_mask), .req_addr(req_addr), .req_wdata(req_wdata), .rsp_valid(rsp_valid), .rsp_rdata(rsp_rdata)
    );

`ifdef WAVES
    // a waveform of the chip (Icarus): make waves
    initial begin
        $dumpfile("out/ga2.vcd");
        $dumpvars(0, u_ga2);
    end
`endif

    reg [31:0] img [0:MAXWORDS-1];
    reg [31:0] ext_want [0:EXTW-1];
    reg [31:0] crc_table [0:255];
    reg [8*(PATH_MAX+1)-1:0] path;  // one character more than allowed: a longer path shows up there
    reg [8*PATH_SHOWN-1:0]   shown; // the path for messages: its end, from "..." when it is longer
    integer i, j, p, ptr, n_prog, n_words, n_code, n_init, n_xrun, n_xval, n_srun, n_sval, rec_len;
    integer at_code, at_init, at_xrun, at_xval, at_srun, at_sval, at_cnt;
    integer cyc, bad, fd, nread, k, c, nbytes, first, len, run_end, vals, lat;
    reg [71:0] ln;                  // one line of the image: 8 hex digits and a line feed
    reg [4:0]  hex_of [0:255];
    reg [7:0]  ch;
    reg [31:0] value, crc, got, want, total_cycles;
    reg [31:0] got_c [0:4];

    // ---- CRC-32 ------------------------------------------------------------------------------
    task crc_init_table;
        reg [31:0] t;
        integer b, n;
        begin
            for (n = 0; n < 256; n = n + 1) begin
                t = n;
                for (b = 0; b < 8; b = b + 1) t = t[0] ? ((t >> 1) ^ CRC_POLY) : (t >> 1);
                crc_table[n] = t;
            end
        end
    endtask

    // crc is the running register (all ones at the start); the CRC of the words so far is ~crc
    task crc_word(input [31:0] w);
        begin
            crc = crc_table[crc[7:0] ^ w[7:0]]   ^ {8'd0, crc[31:8]};
            crc = crc_table[crc[7:0] ^ w[15:8]]  ^ {8'd0, crc[31:8]};
            crc = crc_table[crc[7:0] ^ w[23:16]] ^ {8'd0, crc[31:8]};
            crc = crc_table[crc[7:0] ^ w[31:24]] ^ {8'd0, crc[31:8]};
        end
    endtask

    // ---- reading the image ---------------------------------------------------------------------
    // hex_of[b]: bit 4 set when byte b is a lowercase hex digit, bits 3:0 its value
    task hex_init_table;
        integer n;
        begin
            for (n = 0; n < 256; n = n + 1) hex_of[n] = 5'd0;
            for (n = 0; n < 10; n = n + 1) hex_of[48 + n] = {1'b1, n[3:0]};
            for (n = 0; n < 6; n = n + 1) hex_of[97 + n] = {1'b1, n[3:0] + 4'd10};
        end
    endtask

    // Line nread + 1 into value: eight lowercase hex digits and a line feed, else FAIL. One $fread
    // of the line's 9 bytes (both simulators read them raw, NUL bytes included), checked together;
    // the bytes are looked at one by one only to name the first bad one.
    task read_word;
        begin
            nbytes = $fread(ln, fd);
            if (nbytes < 9) begin
                if (nbytes < 1 && nread == 0)
                    $display("FAIL: cannot read the image %0s: no byte could be read (an empty file or a directory)",
                             shown);
                else if (nbytes < 1)
                    $display("FAIL: truncated image %0s: it ends after line %0d, its header counts %0d lines",
                             shown, nread, n_words);
                else
                    $display("FAIL: truncated image %0s: it ends inside line %0d, after byte %0d", shown,
                             nread + 1, nbytes);
                bad = 1;
            end else if (hex_of[ln[71:64]][4] & hex_of[ln[63:56]][4] & hex_of[ln[55:48]][4] & hex_of[ln[47:40]][4]
                         & hex_of[ln[39:32]][4] & hex_of[ln[31:24]][4] & hex_of[ln[23:16]][4] & hex_of[ln[15:8]][4]
                         & (ln[7:0] == 8'h0a)) begin
                value = {hex_of[ln[71:64]][3:0], hex_of[ln[63:56]][3:0], hex_of[ln[55:48]][3:0], hex_of[ln[47:40]][3:0],
                         hex_of[ln[39:32]][3:0], hex_of[ln[31:24]][3:0], hex_of[ln[23:16]][3:0], hex_of[ln[15:8]][3:0]};
            end else begin
                bad = 1;
                for (k = 1; k <= 8 && bad == 1; k = k + 1) begin
                    ch = ln[72 - 8*k +: 8];
                    if (hex_of[ch][4] == 1'b0) begin
                        $display("FAIL: malformed image %0s: line %0d byte %0d is 0x%h, not a lowercase hex digit (a line is 8 of them and a line feed)",
                                 shown, nread + 1, k, ch);
                        bad = 2;
                    end
                end
                if (bad == 1)
                    $display("FAIL: malformed image %0s: line %0d byte 9 is 0x%h, not the line feed after 8 hex digits",
                             shown, nread + 1, ln[7:0]);
            end
        end
    endtask

    // The header as its words arrive: magic, a program count, a word count within MAXWORDS, its CRC.
    task check_header_word;
        begin
            if (nread == 1 && img[0] !== IMG_MAGIC) begin
                $display("FAIL: malformed image %0s: line 1 is %h, not the image magic %h (an image from tools/ga2_progs.py)",
                         shown, img[0], IMG_MAGIC);
                bad = 1;
            end else if (nread == 2 && (img[1] < 32'd1 || img[1] > MAX_PROGS)) begin
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

    // The whole file into img[0 .. n_words-1]: at most MAXWORDS lines, then the end of the file.
    task read_image;
        begin
            nread = 0;
            n_words = IMG_HEADER;  // until the header says how many
            fd = $fopen(path, "r");
            if (fd == 0) begin
                $display("FAIL: cannot open the image %0s", shown);
                bad = 1;
            end
            while (bad == 0 && nread < n_words) begin
                read_word;
                if (bad == 0) begin
                    img[nread] = value;
                    nread = nread + 1;
                    if (nread <= IMG_HEADER) check_header_word;
                end
            end
            if (bad == 0) begin
                c = $fgetc(fd);
                if (c != -1) begin
                    $display("FAIL: malformed image %0s: the file goes on after the %0d lines its header counts",
                             shown, n_words);
                    bad = 1;
                end
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

    // n runs at `first_at`, over an address space of `limit` words, must ascend without overlapping
    // and cover `want_vals` words in all.
    task check_runs(input integer first_at, input integer n, input integer limit, input integer want_vals,
                    input [8*10:1] what);
        begin
            run_end = 0;
            vals = 0;
            for (j = 0; j < n && bad == 0; j = j + 1) begin
                first = img[first_at + j] & 32'h0000_FFFF;
                len = img[first_at + j] >> 16;
                if (len < 1 || first < run_end || first + len > limit) begin
                    $display("FAIL: malformed image: program %0d %0s run %0d (first %0d, %0d words) is empty, overlaps the run before or passes word %0d",
                             p, what, j, first, len, limit - 1);
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
            ptr = IMG_HEADER;
            for (p = 0; p < n_prog && bad == 0; p = p + 1) begin
                if (ptr + REC_HEADER > n_words) begin
                    $display("FAIL: malformed image: program %0d of %0d starts at line %0d, past the %0d lines the header counts",
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
                        $display("FAIL: malformed image: program %0d record ends at line %0d, past the %0d lines the header counts",
                                 p, ptr + rec_len, n_words);
                        bad = 1;
                    end
                end
                if (bad == 0) check_runs(at_xrun, n_xrun, EXTW, n_xval, "external");
                if (bad == 0) check_runs(at_srun, n_srun, SPW, n_sval, "scratchpad");
                if (bad == 0) begin
                    for (i = ptr; i < ptr + rec_len - 1; i = i + 1) crc_word(img[i]);
                    if (img[ptr + rec_len - 1] !== ~crc) begin
                        $display("FAIL: program %0d: CRC-32 mismatch (line %0d says %h, the image before it gives %h): the image was altered",
                                 p, ptr + rec_len, img[ptr + rec_len - 1], ~crc);
                        bad = 1;
                    end
                    crc_word(img[ptr + rec_len - 1]);
                    ptr = ptr + rec_len;
                end
            end
            if (bad == 0 && ptr != n_words) begin
                $display("FAIL: malformed image: lines %0d..%0d follow the last of the %0d programs", ptr + 1, n_words,
                         n_prog);
                bad = 1;
            end
        end
    endtask

    // ---- the scratchpad, bank by bank (rtl/sram.v: lane a[1:0], group a[SAW-1:SAW-2], row in between)
    function [31:0] sp_word(input [SAW-1:0] a);
        begin
            case ({a[SAW-1:SAW-2], a[1:0]})
                4'd0:    sp_word = u_ga2.u_sram.g_bank[0].u_ram.mem[a[SAW-3:2]];
                4'd1:    sp_word = u_ga2.u_sram.g_bank[1].u_ram.mem[a[SAW-3:2]];
                4'd2:    sp_word = u_ga2.u_sram.g_bank[2].u_ram.mem[a[SAW-3:2]];
                4'd3:    sp_word = u_ga2.u_sram.g_bank[3].u_ram.mem[a[SAW-3:2]];
                4'd4:    sp_word = u_ga2.u_sram.g_bank[4].u_ram.mem[a[SAW-3:2]];
                4'd5:    sp_word = u_ga2.u_sram.g_bank[5].u_ram.mem[a[SAW-3:2]];
                4'd6:    sp_word = u_ga2.u_sram.g_bank[6].u_ram.mem[a[SAW-3:2]];
                4'd7:    sp_word = u_ga2.u_sram.g_bank[7].u_ram.mem[a[SAW-3:2]];
                4'd8:    sp_word = u_ga2.u_sram.g_bank[8].u_ram.mem[a[SAW-3:2]];
                4'd9:    sp_word = u_ga2.u_sram.g_bank[9].u_ram.mem[a[SAW-3:2]];
                4'd10:   sp_word = u_ga2.u_sram.g_bank[10].u_ram.mem[a[SAW-3:2]];
                4'd11:   sp_word = u_ga2.u_sram.g_bank[11].u_ram.mem[a[SAW-3:2]];
                4'd12:   sp_word = u_ga2.u_sram.g_bank[12].u_ram.mem[a[SAW-3:2]];
                4'd13:   sp_word = u_ga2.u_sram.g_bank[13].u_ram.mem[a[SAW-3:2]];
                4'd14:   sp_word = u_ga2.u_sram.g_bank[14].u_ram.mem[a[SAW-3:2]];
                default: sp_word = u_ga2.u_sram.g_bank[15].u_ram.mem[a[SAW-3:2]];
            endcase
        end
    endfunction

    // ---- running one program and comparing ------------------------------------------------------
    task run_program;
        begin
            record_layout;
            // under reset: the code and a HALT through the instruction memory's load port, the
            // external memory directly
            @(negedge clk);
            rst = 1'b1;
            for (i = 0; i < n_code + 4 && i < IMEM_WORDS; i = i + 1) begin
                imem_we = 1'b1;
                imem_addr = i[11:0];
                imem_wdata = (i < n_code) ? img[at_code + i] : 32'd0;
                @(negedge clk);
            end
            imem_we = 1'b0;
            for (i = 0; i < EXTW; i = i + 1) begin
                u_ext.mem[i] = (i < n_init) ? img[at_init + i] : 32'd0;
                ext_want[i] = u_ext.mem[i];
            end
            vals = at_xval;
            for (j = 0; j < n_xrun; j = j + 1) begin
                first = img[at_xrun + j] & 32'h0000_FFFF;
                len = img[at_xrun + j] >> 16;
                for (i = first; i < first + len; i = i + 1) begin
                    ext_want[i] = img[vals];
                    vals = vals + 1;
                end
            end
            @(negedge clk);
            @(negedge clk);
            rst = 1'b0;
            cyc = 0;
            while (!halted && cyc < WATCHDOG) begin
                @(negedge clk);
                cyc = cyc + 1;
            end
            if (!halted) begin
                $display("FAIL: program %0d did not halt within the watchdog bound of %0d cycles", p, WATCHDOG);
                bad = 1;
            end else if (illegal) begin
                $display("FAIL: program %0d halted on an illegal instruction", p);
                bad = 1;
            end
            if (bad == 0) begin
                got_c[0] = c0;
                got_c[1] = c1;
                got_c[2] = c2;
                got_c[3] = c3;
                got_c[4] = c4;
`ifdef DUMP
                $display("COUNTERS %0d %0d %0d %0d %0d %0d", p, c0, c1, c2, c3, c4);
`endif
                total_cycles = total_cycles + c0;
                for (i = 0; i < 5 && bad == 0; i = i + 1) begin
                    want = img[at_cnt + i];
                    if (got_c[i] !== want) begin
                        $display("MISMATCH: program %0d counter c%0d: expected %0d, got %0d", p, i, want, got_c[i]);
                        bad = 1;
                    end
                end
                for (i = 0; i < EXTW && bad == 0; i = i + 1) begin
                    got = u_ext.mem[i];
                    if (got !== ext_want[i]) begin
                        $display("MISMATCH: program %0d external word %0d: expected %h, got %h", p, i, ext_want[i], got);
                        bad = 1;
                    end
                end
                vals = at_sval;
                for (j = 0; j < n_srun && bad == 0; j = j + 1) begin
                    first = img[at_srun + j] & 32'h0000_FFFF;
                    len = img[at_srun + j] >> 16;
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

    initial begin
        bad = 0;
        total_cycles = 32'd0;
        n_prog = 0;
        crc_init_table;
        hex_init_table;
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
        if (!$value$plusargs("LATENCY=%d", lat)) lat = LATENCY;
        if (lat < 0 || lat > 31) begin
            $display("FAIL: +LATENCY=%0d is outside 0..31 (the chip keeps at most 32 reads waiting)", lat);
            bad = 1;
        end else begin
            latency = lat[4:0];
        end
        if (bad == 0) read_image;
        if (bad == 0) check_records;
        ptr = IMG_HEADER;
        for (p = 0; p < n_prog && bad == 0; p = p + 1) begin
            run_program;
            ptr = ptr + rec_len;
        end
        if (bad == 0)
            $display("PASS: %0d programs match the Python reference (external memory, scratchpad and all five cycle counters), %0d cycles in total",
                     n_prog, total_cycles);
        $finish;
    end
endmodule
`default_nettype wire
