// 256 x 32 = 8192 bits, one write port and one synchronous (registered) read port: block RAM
// (two SB_RAM40_4K in 256 x 16 mode). The memory check must pass it.
module ram_1r1w_256x32 (
    input  wire        clk,
    input  wire        we,
    input  wire [7:0]  waddr,
    input  wire [31:0] wdata,
    input  wire [7:0]  raddr,
    output reg  [31:0] rdata
);
    reg [31:0] mem [0:255];
    always @(posedge clk) begin
        if (we) mem[waddr] <= wdata;
        rdata <= mem[raddr];
    end
endmodule
