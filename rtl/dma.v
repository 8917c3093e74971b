`timescale 1ns/1ps
`default_nettype none
// dma: moves rows x cols words between external memory and the scratchpad, one word per cycle,
// from a queue of two descriptors: the transfer that is moving and one waiting behind it.
// Timing: a transfer busies the engine for D = DMA_SETUP + rows*cols cycles: DMA_SETUP idle
// cycles, then one word per cycle. Started in cycle t (the sequencer's fetch cycle) it begins in
// cycle max(t+1, the cycle after the transfer ahead of it ends). `full` is high while a descriptor
// waits; the sequencer does not start a transfer then. `busy` is high while a transfer moves.
// Row r reads ext[ext_base + r*ext_stride + c] and sram[sram_base + r*sram_stride + c].
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
    output reg         full,
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

    // the moving transfer
    reg        store;
    reg [3:0]  setup;  // up to 15 setup cycles
    reg [15:0] r, c, rows_m1, cols_m1, e_stride, e_row;
    reg [11:0] s_stride, s_row;
    // the waiting descriptor
    reg        p_store;
    reg [15:0] p_rows, p_cols, p_ext, p_est;
    reg [11:0] p_sram, p_sst;

    wire        moving    = busy && (setup == 4'd0);
    wire        finishing = moving && (c == cols_m1) && (r == rows_m1);
    wire [11:0] s_addr    = s_row + c[11:0];

    assign ext_addr   = e_row + c;
    assign ext_we     = moving && store;
    assign ext_wdata  = sram_rdata;
    assign sram_raddr = s_addr;
    assign sram_we    = moving && !store;
    assign sram_waddr = s_addr;
    assign sram_wdata = ext_rdata;

    // make a descriptor the moving transfer
    task begin_transfer;
        input        st;
        input [15:0] nr, nc, eb, es;
        input [11:0] sb, ss;
        begin
            busy <= 1'b1;
            store <= st;
            setup <= GA2_DMA_SETUP[3:0];
            r <= 16'd0;
            c <= 16'd0;
            rows_m1 <= nr - 16'd1;
            cols_m1 <= nc - 16'd1;
            e_stride <= es;
            s_stride <= ss;
            e_row <= eb;
            s_row <= sb;
        end
    endtask

    always @(posedge clk) begin
        if (rst) begin
            busy <= 1'b0;
            full <= 1'b0;
            store <= 1'b0;
            setup <= 4'd0;
            r <= 16'd0;
            c <= 16'd0;
            rows_m1 <= 16'd0;
            cols_m1 <= 16'd0;
            e_stride <= 16'd0;
            e_row <= 16'd0;
            s_stride <= 12'd0;
            s_row <= 12'd0;
            p_store <= 1'b0;
            p_rows <= 16'd0;
            p_cols <= 16'd0;
            p_ext <= 16'd0;
            p_est <= 16'd0;
            p_sram <= 12'd0;
            p_sst <= 12'd0;
        end else begin
            // advance the moving transfer
            if (busy) begin
                if (setup != 4'd0) begin
                    setup <= setup - 4'd1;
                end else if (c == cols_m1) begin
                    c <= 16'd0;
                    e_row <= e_row + e_stride;
                    s_row <= s_row + s_stride;
                    r <= r + 16'd1;
                end else begin
                    c <= c + 16'd1;
                end
            end
            if (finishing) begin
                if (full) begin
                    begin_transfer(p_store, p_rows, p_cols, p_ext, p_est, p_sram, p_sst);
                    full <= 1'b0;
                end else if (start) begin
                    begin_transfer(is_store, rows, cols, ext_base, ext_stride, sram_base, sram_stride);
                end else begin
                    busy <= 1'b0;
                end
            end else if (start) begin
                if (!busy) begin
                    begin_transfer(is_store, rows, cols, ext_base, ext_stride, sram_base, sram_stride);
                end else begin
                    full <= 1'b1;
                    p_store <= is_store;
                    p_rows <= rows;
                    p_cols <= cols;
                    p_ext <= ext_base;
                    p_est <= ext_stride;
                    p_sram <= sram_base;
                    p_sst <= sram_stride;
                end
            end
        end
    end
endmodule
`default_nettype wire
