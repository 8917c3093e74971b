`timescale 1ns/1ps
`default_nettype none
// extmem_rw: the external memory of the testbenches, EXTW 32-bit words behind a request/response
// port WORDS words wide (1 or 2): a request names its first word, req_addr, and which of the words
// req_addr + j it moves (req_mask). A request is taken in a cycle where req_valid and req_ready are
// both high: a write updates its words at that cycle's edge; a read is answered LATENCY cycles later
// (rsp_valid with the words as they were when the read was taken, word j in bits 32j+31:32j;
// LATENCY = 0 answers in the same cycle). Answers come in order.
// req_ready is always high unless RANDOM_READY is set: then a fixed pseudo-random pattern holds it
// low about one cycle in four, to test that the chip waits (the machine model's cycle counts assume
// an always-ready memory). The testbench fills and checks `mem` directly between programs.
module extmem_rw #(
    parameter integer EXTW         = 8192,
    parameter integer WORDS        = 1,
    parameter integer LATENCY      = 4,
    parameter integer RANDOM_READY = 0
) (
    input  wire        clk,
    input  wire        rst,
    input  wire        req_valid,
    output wire        req_ready,
    input  wire        req_we,
    input  wire [WORDS-1:0] req_mask,
    input  wire [15:0] req_addr,
    input  wire [32*WORDS-1:0] req_wdata,
    output wire        rsp_valid,
    output wire [32*WORDS-1:0] rsp_rdata
);
    localparam integer AW = (EXTW > 1) ? $clog2(EXTW) : 1;
    localparam integer PIPE = (LATENCY > 0) ? LATENCY : 1;

    reg [31:0] mem [0:EXTW-1];

    // the words of a request (programs stay below EXTW: the machine model checks, so high bits are zero)
    /* verilator lint_off UNUSEDSIGNAL */
    wire [15:0] wa [0:WORDS-1];
    /* verilator lint_on UNUSEDSIGNAL */
    wire [32*WORDS-1:0] rword;  // the memory's words at the request, word j in bits 32j+31:32j
    genvar gj;
    generate
        for (gj = 0; gj < WORDS; gj = gj + 1) begin : g_word
            assign wa[gj] = req_addr + gj[15:0];
            assign rword[32*gj +: 32] = mem[wa[gj][AW-1:0]];
        end
    endgenerate

    reg [15:0] lfsr;
    always @(posedge clk) begin
        if (rst) lfsr <= 16'hace1;
        else lfsr <= {lfsr[14:0], lfsr[15] ^ lfsr[13] ^ lfsr[12] ^ lfsr[10]};
    end
    assign req_ready = (RANDOM_READY == 0) || (lfsr[1:0] != 2'b00);

    wire take_read = req_valid && req_ready && !req_we;
    integer j;
    always @(posedge clk) begin
        for (j = 0; j < WORDS; j = j + 1) begin
            if (req_valid && req_ready && req_we && req_mask[j]) mem[wa[j][AW-1:0]] <= req_wdata[32*j +: 32];
        end
    end

    // reads: a pipeline of LATENCY stages (none for LATENCY = 0); stage s is bit s-1 of pv and
    // entry s-1 of pd, DW bits each (one spare stage on top keeps the shifts free of width casts).
    // It moves only while a read is in it.
    localparam integer DW = 32 * WORDS;
    reg [PIPE:0]        pv;
    /* verilator lint_off UNUSEDSIGNAL */
    reg [DW*PIPE+DW-1:0] pd;  // the spare stage's entry is shifted in and never read
    /* verilator lint_on UNUSEDSIGNAL */
    wire                moving = take_read || (pv[PIPE-1:0] != {PIPE{1'b0}});
    always @(posedge clk) begin
        if (rst) pv <= {(PIPE+1){1'b0}};
        else if (moving) pv <= {pv[PIPE-1:0], take_read};
        if (moving) pd <= {pd[DW*PIPE-1:0], rword};
    end
    assign rsp_valid = (LATENCY == 0) ? take_read : pv[PIPE-1];
    assign rsp_rdata = (LATENCY == 0) ? rword : pd[DW*PIPE-DW +: DW];
endmodule
`default_nettype wire
