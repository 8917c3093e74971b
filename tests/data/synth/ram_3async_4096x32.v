// 4096 x 32 = 131072 bits with three asynchronous read ports, like the scratchpad GA2 started with:
// block RAM reads synchronously, so this would be built from flip-flops. The memory check must fail it.
module ram_3async_4096x32 (
    input  wire        clk,
    input  wire        we,
    input  wire [11:0] waddr,
    input  wire [31:0] wdata,
    input  wire [11:0] ra,
    input  wire [11:0] rb,
    input  wire [11:0] rc,
    output wire [31:0] da,
    output wire [31:0] db,
    output wire [31:0] dc
);
    reg [31:0] mem [0:4095];
    always @(posedge clk) begin
        if (we) mem[waddr] <= wdata;
    end
    assign da = mem[ra];
    assign db = mem[rb];
    assign dc = mem[rc];
endmodule
