`timescale 1ns/1ps
`default_nettype none
// extmem_rw: the external memory model, EXTW 32-bit words, one access per cycle.
// Reads are asynchronous; a write happens at the clock edge. The testbench fills and checks
// `mem` directly between programs.
module extmem_rw #(
    parameter integer EXTW = 8192
) (
    input  wire        clk,
    input  wire [15:0] addr,
    output wire [31:0] rdata,
    input  wire        we,
    input  wire [31:0] wdata
);
    localparam integer AW = (EXTW > 1) ? $clog2(EXTW) : 1;

    reg [31:0] mem [0:EXTW-1];

    /* verilator lint_off UNUSEDSIGNAL */
    wire [15:0] a = addr;  // programs stay below EXTW (the machine model checks), so high bits are zero
    /* verilator lint_on UNUSEDSIGNAL */
    assign rdata = mem[a[AW-1:0]];

    always @(posedge clk) begin
        if (we) mem[a[AW-1:0]] <= wdata;
    end
endmodule
`default_nettype wire
