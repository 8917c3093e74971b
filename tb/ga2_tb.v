`timescale 1ns/1ps
`default_nettype none
// ga2_tb: replays every program of a hex image on GA2 and compares the final external memory and
// the five cycle counters with what the Python machine model predicted.
//
// Image (one 32-bit hex word per line, as written by tools/ga2_progs.py and tools/ch15_run.py):
//   programs,
//   per program: REC_MAGIC, n_code, n_init, n_expect, code[n_code], init[n_init],
//                expect[n_expect], counters[5], checksum (sum of the record's other words mod 2^32).
// The testbench reads the file itself, line by line, so every simulator treats a bad file the same
// way: a character that is not a hex digit or more than 8 digits on a line is a FAIL naming the
// line; a record that runs past the last word read is a FAIL (truncated); a flipped bit anywhere
// breaks the checksum.
// External memory starts as init followed by zeros; after HALT words 0..n_expect-1 must equal
// expect and every later word must still be zero. Exactly one verdict line is printed:
// PASS / FAIL (a malformed image, a program that does not halt) / MISMATCH (a word or a counter).
// Each program's code goes into GA2's instruction memory through its load port, followed by a
// HALT (so the code never runs into what an earlier program left there); the scratchpad is not
// cleared: a program only reads scratchpad words it wrote (the machine model enforces it).
// Plusargs: +PROG=<file> (default out/ga2_programs.hex). Defines: EXTW, EXT_LATENCY (the external
// memory's read latency, default 4 = model/capra/isa.py EXT_LATENCY), DUMP, WATCHDOG, MAXWORDS,
// WAVES (writes out/ga2.vcd).
module ga2_tb;
`ifndef EXTW
    `define EXTW 8192
`endif
`ifndef WATCHDOG
    `define WATCHDOG 2000000
`endif
`ifndef MAXWORDS
    `define MAXWORDS 524288
`endif
`ifndef EXT_LATENCY
    `define EXT_LATENCY 4
`endif
    localparam integer EXTW       = `EXTW;
    localparam integer WATCHDOG   = `WATCHDOG;
    localparam integer MAXWORDS   = `MAXWORDS;
    localparam integer LATENCY    = `EXT_LATENCY;
    `include "ga2_defs.vh"
    localparam integer IMEM_WORDS = 4 * GA2_IMEM_INSTRS;
    localparam [31:0] REC_MAGIC  = 32'h5245_4321;  // "REC!"

    reg clk = 1'b0;
    reg rst = 1'b1;
    always #5 clk = ~clk;

    wire        halted, illegal;
    wire [31:0] c0, c1, c2, c3, c4;
    wire        req_valid, req_ready, req_we, rsp_valid;
    wire [15:0] req_addr;
    wire [31:0] req_wdata, rsp_rdata;
    reg         imem_we = 1'b0;
    reg  [11:0] imem_addr = 12'd0;
    reg  [31:0] imem_wdata = 32'd0;

    ga2 u_ga2 (
        .clk(clk), .rst(rst), .imem_we(imem_we), .imem_addr(imem_addr), .imem_wdata(imem_wdata),
        .halted(halted), .illegal(illegal), .c0(c0), .c1(c1), .c2(c2), .c3(c3), .c4(c4),
        .ext_req_valid(req_valid), .ext_req_ready(req_ready), .ext_req_we(req_we), .ext_req_addr(req_addr),
        .ext_req_wdata(req_wdata), .ext_rsp_valid(rsp_valid), .ext_rsp_rdata(rsp_rdata)
    );
    extmem_rw #(.EXTW(EXTW), .LATENCY(LATENCY)) u_ext (
        .clk(clk), .rst(rst), .req_valid(req_valid), .req_ready(req_ready), .req_we(req_we),
        .req_addr(req_addr), .req_wdata(req_wdata), .rsp_valid(rsp_valid), .rsp_rdata(rsp_rdata)
    );

`ifdef WAVES
    // a waveform of the chip (Icarus): make waves
    initial begin
        $dumpfile("out/ga2.vcd");
        $dumpvars(0, u_ga2);
    end
`endif

    reg [31:0] img [0:MAXWORDS-1];
    reg [1023:0] path;
    integer i, p, ptr, n_prog, n_code, n_init, n_exp, cyc, bad, rec_start;
    integer fd, nread, lineno, nchars, k, digits;
    reg [8*80:1] line;
    reg [7:0]  ch;
    reg [31:0] value;
    reg [31:0] sum, got, want, total_cycles;
    reg [31:0] got_c [0:4];

    // Read the image into img[0 .. nread-1]; on a bad line print FAIL and set bad.
    task read_image;
        begin
            nread = 0;
            lineno = 0;
            fd = $fopen(path, "r");
            if (fd == 0) begin
                $display("FAIL: cannot open the image %0s", path);
                bad = 1;
            end
            while (bad == 0 && fd != 0 && !$feof(fd)) begin
                line = 0;
                nchars = $fgets(line, fd);
                lineno = lineno + 1;
                value = 32'd0;
                digits = 0;
                for (k = nchars; k >= 1 && bad == 0; k = k - 1) begin
                    ch = line[8*k -: 8];
                    if (ch >= "0" && ch <= "9") begin
                        value = {value[27:0], ch[3:0]};
                        digits = digits + 1;
                    end else if ((ch >= "a" && ch <= "f") || (ch >= "A" && ch <= "F")) begin
                        value = {value[27:0], ch[3:0] + 4'd9};
                        digits = digits + 1;
                    end else if (ch != 8'd10 && ch != 8'd13 && ch != " " && ch != 8'd9) begin
                        $display("FAIL: malformed image %0s: line %0d has the character '%c', not a hex digit",
                                 path, lineno, ch);
                        bad = 1;
                    end
                end
                if (bad == 0 && digits > 8) begin
                    $display("FAIL: malformed image %0s: line %0d has %0d hex digits, more than a 32-bit word",
                             path, lineno, digits);
                    bad = 1;
                end else if (bad == 0 && digits > 0) begin
                    if (nread == MAXWORDS) begin
                        $display("FAIL: the image %0s has more than MAXWORDS=%0d words", path, MAXWORDS);
                        bad = 1;
                    end else begin
                        img[nread] = value;
                        nread = nread + 1;
                    end
                end
            end
            if (fd != 0) $fclose(fd);
        end
    endtask

    initial begin
        if (!$value$plusargs("PROG=%s", path)) path = "out/ga2_programs.hex";
        bad = 0;
        total_cycles = 32'd0;
        read_image;
        n_prog = (nread > 0) ? img[0] : 0;
        if (bad == 0 && (nread == 0 || n_prog < 1 || n_prog > 65535)) begin
            $display("FAIL: malformed image %0s: the first word (%0d words read) is not a program count", path, nread);
            bad = 1;
        end
        ptr = 1;
        for (p = 0; p < n_prog && bad == 0; p = p + 1) begin
            rec_start = ptr;
            n_code = (ptr + 3 < nread) ? img[ptr+1] : 0;
            n_init = (ptr + 3 < nread) ? img[ptr+2] : 0;
            n_exp  = (ptr + 3 < nread) ? img[ptr+3] : 0;
            if (ptr + 3 >= nread) begin
                $display("FAIL: truncated image: the file ends (%0d words) before program %0d of %0d", nread, p, n_prog);
                bad = 1;
            end else if (img[ptr] !== REC_MAGIC) begin
                $display("FAIL: malformed image: program %0d record does not start with the record magic (word %0d)", p, ptr);
                bad = 1;
            end else if (n_code < 0 || n_init < 0 || n_exp < 0
                         || n_code > IMEM_WORDS || n_init > EXTW || n_exp > EXTW
                         || ptr + 4 + n_code + n_init + n_exp + 6 > MAXWORDS) begin
                $display("FAIL: malformed image: program %0d sizes (code %0d, init %0d, expect %0d) do not fit (IMEM %0d, EXTW %0d, MAXWORDS %0d)",
                         p, n_code, n_init, n_exp, IMEM_WORDS, EXTW, MAXWORDS);
                bad = 1;
            end else if (ptr + 4 + n_code + n_init + n_exp + 5 >= nread) begin
                $display("FAIL: truncated image: program %0d record should end at word %0d, the file has %0d words",
                         p, ptr + 4 + n_code + n_init + n_exp + 5, nread);
                bad = 1;
            end else begin
                sum = 32'd0;
                for (i = rec_start; i < rec_start + 4 + n_code + n_init + n_exp + 5; i = i + 1) sum = sum + img[i];
                if (sum !== img[rec_start + 4 + n_code + n_init + n_exp + 5]) begin
                    $display("FAIL: program %0d: checksum mismatch (record says %h, words sum to %h): the image was altered",
                             p, img[rec_start + 4 + n_code + n_init + n_exp + 5], sum);
                    bad = 1;
                end
            end
            if (bad == 0) begin
                // under reset: the code and a HALT through the instruction memory's load port, the
                // external memory directly
                @(negedge clk);
                rst = 1'b1;
                for (i = 0; i < n_code + 4 && i < IMEM_WORDS; i = i + 1) begin
                    imem_we = 1'b1;
                    imem_addr = i[11:0];
                    imem_wdata = (i < n_code) ? img[ptr+4+i] : 32'd0;
                    @(negedge clk);
                end
                imem_we = 1'b0;
                for (i = 0; i < EXTW; i = i + 1) u_ext.mem[i] = (i < n_init) ? img[ptr+4+n_code+i] : 32'd0;
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
                    want = img[ptr + 4 + n_code + n_init + n_exp + i];
                    if (got_c[i] !== want) begin
                        $display("MISMATCH: program %0d counter c%0d: expected %0d, got %0d", p, i, want, got_c[i]);
                        bad = 1;
                    end
                end
                for (i = 0; i < EXTW && bad == 0; i = i + 1) begin
                    want = (i < n_exp) ? img[ptr + 4 + n_code + n_init + i] : 32'd0;
                    got = u_ext.mem[i];
                    if (got !== want) begin
                        $display("MISMATCH: program %0d external word %0d: expected %h, got %h", p, i, want, got);
                        bad = 1;
                    end
                end
            end
            ptr = ptr + 4 + n_code + n_init + n_exp + 6;
        end
        if (bad == 0 && ptr != nread) begin
            $display("FAIL: malformed image: words follow the last of the %0d programs (word %0d)", n_prog, ptr);
            bad = 1;
        end
        if (bad == 0)
            $display("PASS: %0d programs match the Python reference (memory and all five cycle counters), %0d cycles in total",
                     n_prog, total_cycles);
        $finish;
    end
endmodule
`default_nettype wire
