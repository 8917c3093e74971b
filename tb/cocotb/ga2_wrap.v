`timescale 1ns/1ps
`default_nettype none
// ga2_wrap: the GA2 top with tb/extmem_rw.v's external memory, as tb/ga2_tb.v wires them, plus what
// the cocotb test needs to set up a program and read its results:
//   imem_we / imem_addr / imem_wdata  ga2's own instruction memory load port (used while rst is high)
//   host_*                            a host port on the external memory: while host_sel is high the
//                                     memory sees host_addr / host_we / host_wdata instead of ga2's
//                                     DMA port (ga2's writes are blocked); host_rdata is the
//                                     asynchronous read of host_addr
//   sram_clear                        at a rising edge with sram_clear high every scratchpad word
//                                     becomes zero (a hierarchical write into rtl/sram.v's `mem`;
//                                     used only while rst is high, when nothing else writes it)
module ga2_wrap #(
    parameter integer EXTW = 1024  // capra.randprog.EXTW
) (
    input  wire        clk,
    input  wire        rst,
    input  wire        imem_we,
    input  wire [11:0] imem_addr,
    input  wire [31:0] imem_wdata,
    output wire        halted,
    output wire        illegal,
    output wire [31:0] c0,
    output wire [31:0] c1,
    output wire [31:0] c2,
    output wire [31:0] c3,
    output wire [31:0] c4,
    input  wire        host_sel,
    input  wire        host_we,
    input  wire [15:0] host_addr,
    input  wire [31:0] host_wdata,
    output wire [31:0] host_rdata,
    input  wire        sram_clear
);
    `include "ga2_defs.vh"

    wire [15:0] ga2_addr;
    wire [31:0] ext_rdata, ga2_wdata;
    wire        ga2_we;

    ga2 #(.IMEM_WORDS(4 * GA2_IMEM_INSTRS)) u_ga2 (
        .clk(clk), .rst(rst), .imem_we(imem_we), .imem_addr(imem_addr), .imem_wdata(imem_wdata),
        .halted(halted), .illegal(illegal), .c0(c0), .c1(c1), .c2(c2), .c3(c3), .c4(c4),
        .ext_addr(ga2_addr), .ext_rdata(ext_rdata), .ext_we(ga2_we), .ext_wdata(ga2_wdata)
    );

    extmem_rw #(.EXTW(EXTW)) u_ext (
        .clk(clk),
        .addr(host_sel ? host_addr : ga2_addr),
        .rdata(ext_rdata),
        .we(host_sel ? host_we : ga2_we),
        .wdata(host_sel ? host_wdata : ga2_wdata)
    );
    assign host_rdata = ext_rdata;

    integer k;
    always @(posedge clk) begin
        if (sram_clear) begin
            for (k = 0; k < GA2_SRAM_WORDS; k = k + 1) u_ga2.u_sram.mem[k] <= 32'd0;
        end
    end
endmodule
`default_nettype wire
