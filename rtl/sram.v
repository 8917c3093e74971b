`timescale 1ns/1ps
`default_nettype none
// sram: GA2's on-chip scratchpad of 32-bit words.
// Three asynchronous read ports (two for the compute unit that is running, one for the DMA engine)
// and two synchronous write ports (compute, DMA). Reads see the value before this cycle's writes.
// Programs never let the compute unit and the DMA touch the same word while a transfer is in
// flight (the machine model rejects such programs), so the two write ports never collide.
module sram #(
    parameter integer WORDS = 4096,
    parameter integer AW    = 12
) (
    input  wire          clk,
    input  wire [AW-1:0] ra_addr,
    output wire [31:0]   ra_data,
    input  wire [AW-1:0] rb_addr,
    output wire [31:0]   rb_data,
    input  wire [AW-1:0] rd_addr,
    output wire [31:0]   rd_data,
    input  wire          wc_en,
    input  wire [AW-1:0] wc_addr,
    input  wire [31:0]   wc_data,
    input  wire          wd_en,
    input  wire [AW-1:0] wd_addr,
    input  wire [31:0]   wd_data
);
    reg [31:0] mem [0:WORDS-1];

    assign ra_data = mem[ra_addr];
    assign rb_data = mem[rb_addr];
    assign rd_data = mem[rd_addr];

    always @(posedge clk) begin
        if (wc_en) mem[wc_addr] <= wc_data;
        if (wd_en) mem[wd_addr] <= wd_data;
    end
endmodule
`default_nettype wire
