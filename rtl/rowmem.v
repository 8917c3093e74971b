`timescale 1ns/1ps
`default_nettype none
// rowmem: NB byte buffers of DEPTH int8 elements each, the operand rows of the matmul engine.
// One word write per cycle, in one of two shapes:
//   scatter = 0: the word's four lanes go to buffer `sel`, elements 4*idx .. 4*idx+3 (a packed row)
//   scatter = 1: lane l goes to buffer l, element idx (one row of a K x M matrix, i.e. a transpose)
// Every buffer has its own asynchronous read port (rd_idx lane q reads buffer q).
module rowmem #(
    parameter integer NB    = 4,
    parameter integer DEPTH = 1024,
    parameter integer IW    = 10
) (
    input  wire            clk,
    input  wire            we,
    input  wire            scatter,
    input  wire [1:0]      sel,
    input  wire [IW-1:0]   idx,
    input  wire [31:0]     wdata,
    input  wire [NB*IW-1:0] rd_idx,
    output wire [NB*8-1:0] rd_data
);
    reg [7:0] mem [0:NB*DEPTH-1];

    // Element (buffer b, index e) lives at b*DEPTH + e.
    wire [IW+1:0] row_base = {sel, idx[IW-3:0], 2'b00};

    integer l;
    always @(posedge clk) begin
        if (we) begin
            for (l = 0; l < 4; l = l + 1) begin
                if (scatter) mem[l*DEPTH + {{(32-IW){1'b0}}, idx}] <= wdata[l*8 +: 8];
                else mem[{{(30-IW){1'b0}}, row_base} + l] <= wdata[l*8 +: 8];
            end
        end
    end

    genvar q;
    generate
        for (q = 0; q < NB; q = q + 1) begin : g_read
            assign rd_data[q*8 +: 8] = mem[q*DEPTH + {{(32-IW){1'b0}}, rd_idx[q*IW +: IW]}];
        end
    endgenerate
endmodule
`default_nettype wire
