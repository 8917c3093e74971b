`timescale 1ns/1ps
`default_nettype none
// dma: moves rows x cols words between external memory and the scratchpad, one word per cycle.
// Timing: started in cycle t (the sequencer's fetch cycle), busy is high in cycles t+1 .. t+D with
// D = DMA_SETUP + rows*cols: DMA_SETUP idle cycles, then word j of the transfer moves in cycle
// t+1+DMA_SETUP+j. Row r reads ext[ext_base + r*ext_stride + c] and sram[sram_base + r*sram_stride + c].
module dma (
    input  wire        clk,
    input  wire        rst,
    input  wire        start,
    input  wire        is_store,
    input  wire [15:0] rows,
    input  wire [15:0] cols,
    input  wire [11:0] sram_base,
    input  wire [15:0] ext_base,
    input  wire [15:0] ext_stride,
    input  wire [11:0] sram_stride,
    output reg         busy,
    // external memory
    output wire [15:0] ext_addr,
    input  wire [31:0] ext_rdata,
    output wire        ext_we,
    output wire [31:0] ext_wdata,
    // scratchpad
    output wire [11:0] sram_raddr,
    input  wire [31:0] sram_rdata,
    output wire        sram_we,
    output wire [11:0] sram_waddr,
    output wire [31:0] sram_wdata
);
    `include "ga2_defs.vh"

    reg        store;
    reg [1:0]  setup;
    reg [15:0] r, c, rows_m1, cols_m1, e_stride, e_row;
    reg [11:0] s_stride, s_row;

    wire        moving = busy && (setup == 2'd0);
    wire [11:0] s_addr = s_row + c[11:0];

    assign ext_addr   = e_row + c;
    assign ext_we     = moving && store;
    assign ext_wdata  = sram_rdata;
    assign sram_raddr = s_addr;
    assign sram_we    = moving && !store;
    assign sram_waddr = s_addr;
    assign sram_wdata = ext_rdata;

    always @(posedge clk) begin
        if (rst) begin
            busy <= 1'b0;
            store <= 1'b0;
            setup <= 2'd0;
            r <= 16'd0;
            c <= 16'd0;
            rows_m1 <= 16'd0;
            cols_m1 <= 16'd0;
            e_stride <= 16'd0;
            s_stride <= 12'd0;
            e_row <= 16'd0;
            s_row <= 12'd0;
        end else if (start) begin
            busy <= 1'b1;
            store <= is_store;
            setup <= GA2_DMA_SETUP[1:0];
            r <= 16'd0;
            c <= 16'd0;
            rows_m1 <= rows - 16'd1;
            cols_m1 <= cols - 16'd1;
            e_stride <= ext_stride;
            s_stride <= sram_stride[11:0];
            e_row <= ext_base;
            s_row <= sram_base;
        end else if (busy) begin
            if (setup != 2'd0) begin
                setup <= setup - 2'd1;
            end else if (c == cols_m1) begin
                c <= 16'd0;
                e_row <= e_row + e_stride;
                s_row <= s_row + s_stride;
                if (r == rows_m1) busy <= 1'b0;
                else r <= r + 16'd1;
            end else begin
                c <= c + 16'd1;
            end
        end
    end
endmodule
`default_nettype wire
