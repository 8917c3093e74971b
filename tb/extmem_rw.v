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

    // reads: a pipeline of LATENCY stages (none for LATENCY = 0)
    reg        pv [1:PIPE];
    reg [31:0] pd [1:PIPE];
    integer s;
    always @(posedge clk) begin
        if (rst) begin
            for (s = 1; s <= PIPE; s = s + 1) pv[s] <= 1'b0;
        end else begin
            pv[1] <= take_read;
            for (s = 2; s <= PIPE; s = s + 1) pv[s] <= pv[s-1];
        end
        pd[1] <= mem[a[AW-1:0]];
        for (s = 2; s <= PIPE; s = s + 1) pd[s] <= pd[s-1];
    end
    assign rsp_valid = (LATENCY == 0) ? take_read : pv[PIPE];
    assign rsp_rdata = (LATENCY == 0) ? mem[a[AW-1:0]] : pd[PIPE];
endmodule
`default_nettype wire
