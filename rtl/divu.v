`timescale 1ns/1ps
`default_nettype none
// divu: 32-bit unsigned restoring divider, one quotient bit per cycle.
// `start` in cycle s loads the operands; cycles s+1 .. s+32 each produce one quotient bit; the
// quotient and remainder are valid from cycle s+33 on (done is high from then until the next
// start). Division by zero is defined: quotient 32'hffffffff, remainder = dividend.
module divu (
    input  wire        clk,
    input  wire        rst,
    input  wire        start,
    input  wire [31:0] dividend,
    input  wire [31:0] divisor,
    output reg  [31:0] quotient,
    output reg  [31:0] remainder,
    output wire        done
);
    reg [31:0] d;
    reg [5:0]  left;     // iterations still to do
    reg        running;

    wire [32:0] shifted = {remainder, quotient[31]};
    wire [32:0] diff    = shifted - {1'b0, d};

    assign done = !running;

    always @(posedge clk) begin
        if (rst) begin
            quotient <= 32'd0;
            remainder <= 32'd0;
            d <= 32'd0;
            left <= 6'd0;
            running <= 1'b0;
        end else if (start) begin
            quotient <= dividend;
            remainder <= 32'd0;
            d <= divisor;
            left <= 6'd32;
            running <= 1'b1;
        end else if (running) begin
            if (!diff[32]) begin
                remainder <= diff[31:0];
                quotient <= {quotient[30:0], 1'b1};
            end else begin
                remainder <= shifted[31:0];
                quotient <= {quotient[30:0], 1'b0};
            end
            left <= left - 6'd1;
            if (left == 6'd1) running <= 1'b0;
        end
    end
endmodule
`default_nettype wire
