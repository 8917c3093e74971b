`timescale 1ns/1ps
`default_nettype none
// extmem_rw: the external memory of the testbenches, EXTW 32-bit words behind a request/response
// port. A request is taken in a cycle where req_valid and req_ready are both high: a write updates
// the word at that cycle's edge; a read is answered LATENCY cycles later (rsp_valid with the word as
// it was when the read was taken; LATENCY = 0 answers in the same cycle). Answers come in order.
// req_ready is always high unless RANDOM_READY is set: then a fixed pseudo-random pattern holds it
// low about one cycle in four, to test that the chip waits (the machine model's cycle counts assume
// an always-ready memory). The testbench fills and checks `mem` directly between programs.
module extmem_rw #(
    parameter integer EXTW         = 8192,
    parameter integer LATENCY      = 4,
    parameter integer RANDOM_READY = 0
) (
    input  wire        clk,
    input  wire        rst,
    input  wire        req_valid,
    output wire        req_ready,
    input  wire        req_we,
    input  wire [15:0] req_addr,
    input  wire [31:0] req_wdata,
    output wire        rsp_valid,
    output wire [31:0] rsp_rdata
);
    localparam integer AW = (EXTW > 1) ? $clog2(EXTW) : 1;
    localparam integer PIPE = (LATENCY > 0) ? LATENCY : 1;

    reg [31:0] mem [0:EXTW-1];

    /* verilator lint_off UNUSEDSIGNAL */
    wire [15:0] a = req_addr;  // programs stay below EXTW (the machine model checks), so high bits are zero
    /* verilator lint_on UNUSEDSIGNAL */

    reg [15:0] lfsr;
    always @(posedge clk) begin
        if (rst) lfsr <= 16'hace1;
        else lfsr <= {lfsr[14:0], lfsr[15] ^ lfsr[13] ^ lfsr[12] ^ lfsr[10]};
    end
    assign req_ready = (RANDOM_READY == 0) || (lfsr[1:0] != 2'b00);

    wire take_read = req_valid && req_ready && !req_we;
    always @(posedge clk) begin
        if (req_valid && req_ready && req_we) mem[a[AW-1:0]] <= req_wdata;
    end

    // reads: a pipeline of LATENCY stages (none for LATENCY = 0); stage s is bit s-1 of pv and word
    // s-1 of pd (one spare stage on top keeps the shifts free of width casts). It moves only while
    // a read is in it.
    reg [PIPE:0]        pv;
    /* verilator lint_off UNUSEDSIGNAL */
    reg [32*PIPE+31:0]  pd;  // the spare stage's word is shifted in and never read
    /* verilator lint_on UNUSEDSIGNAL */
    wire                moving = take_read || (pv[PIPE-1:0] != {PIPE{1'b0}});
    always @(posedge clk) begin
        if (rst) pv <= {(PIPE+1){1'b0}};
        else if (moving) pv <= {pv[PIPE-1:0], take_read};
        if (moving) pd <= {pd[32*PIPE-1:0], mem[a[AW-1:0]]};
    end
    assign rsp_valid = (LATENCY == 0) ? take_read : pv[PIPE-1];
    assign rsp_rdata = (LATENCY == 0) ? mem[a[AW-1:0]] : pd[32*PIPE-32 +: 32];
endmodule
`default_nettype wire
