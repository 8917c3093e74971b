`timescale 1ns/1ps
`default_nettype none
// extmem_rw: the external memory of the testbenches, EXTW 32-bit words behind a request/response
// port WORDS words wide (1 or 2): a request names its first word, req_addr, and which of the words
// req_addr + j it moves (req_mask). A request is taken in a cycle where req_valid and req_ready are
// both high: a write updates its words at that cycle's edge; a read is answered `latency` cycles
// later (rsp_valid with the words as they were when the read was taken, word j in bits 32j+31:32j;
// latency 0 answers in the same cycle). Answers come in order. The latency is an input, 0 .. 31
// (the chip keeps at most 32 reads waiting, GA2_DMA_PENDING), held steady while the memory is in
// use, so one simulator build serves every latency (the replay testbench takes it from +LATENCY).
// req_ready is always high unless RANDOM_READY is set: then a fixed pseudo-random pattern holds it
// low about one cycle in four, to test that the chip waits (the machine model's cycle counts assume
// an always-ready memory). The testbench fills and checks `mem` directly between programs.
module extmem_rw #(
    parameter integer EXTW         = 8192,
    parameter integer WORDS        = 1,
    parameter integer RANDOM_READY = 0
) (
    input  wire        clk,
    input  wire        rst,
    input  wire [4:0]  latency,
    input  wire        req_valid,
    output wire        req_ready,
    input  wire        req_we,
    input  wire [WORDS-1:0] req_mask,
    input  wire [31:0] req_addr,
    input  wire [32*WORDS-1:0] req_wdata,
    output wire        rsp_valid,
    output wire [32*WORDS-1:0] rsp_rdata
);
    localparam integer AW = (EXTW > 1) ? $clog2(EXTW) : 1;
    localparam integer SLOTS = 32;  // answer slots, one per cycle of a round: more than any latency

    reg [31:0] mem [0:EXTW-1];

    // the words of a request (programs stay below EXTW: the machine model checks, so high bits are zero)
    /* verilator lint_off UNUSEDSIGNAL */
    wire [31:0] wa [0:WORDS-1];
    /* verilator lint_on UNUSEDSIGNAL */
    wire [32*WORDS-1:0] rword;  // the memory's words at the request, word j in bits 32j+31:32j
    genvar gj;
    generate
        for (gj = 0; gj < WORDS; gj = gj + 1) begin : g_word
            assign wa[gj] = req_addr + gj;
            assign rword[32*gj +: 32] = mem[wa[gj][AW-1:0]];
        end
    endgenerate

    reg [15:0] lfsr;
    always @(posedge clk) begin
        if (rst) lfsr <= 16'hace1;
        else lfsr <= {lfsr[14:0], lfsr[15] ^ lfsr[13] ^ lfsr[12] ^ lfsr[10]};
    end
    assign req_ready = (RANDOM_READY == 0) || (lfsr[1:0] != 2'b00);

    wire take_read = req_valid && req_ready && !req_we;
    integer j;
    always @(posedge clk) begin
        for (j = 0; j < WORDS; j = j + 1) begin
            if (req_valid && req_ready && req_we && req_mask[j]) mem[wa[j][AW-1:0]] <= req_wdata[32*j +: 32];
        end
    end

    // reads: the answer to a read taken in cycle t waits in slot (t + latency) mod SLOTS, and slot
    // `now` (the cycle mod SLOTS) is answered in its cycle; latency 0 answers the read itself.
    localparam integer DW = 32 * WORDS;
    reg [DW-1:0]    slot_data [0:SLOTS-1];
    reg [SLOTS-1:0] slot_full;
    reg [4:0]       now;
    wire [4:0]      due = now + latency;
    always @(posedge clk) begin
        if (rst) begin
            now <= 5'd0;
            slot_full <= {SLOTS{1'b0}};
        end else begin
            now <= now + 5'd1;
            slot_full[now] <= 1'b0;
            if (take_read && latency != 5'd0) begin
                slot_full[due] <= 1'b1;
                slot_data[due] <= rword;
            end
        end
    end
    assign rsp_valid = (latency == 5'd0) ? take_read : slot_full[now];
    assign rsp_rdata = (latency == 5'd0) ? rword : slot_data[now];
endmodule
`default_nettype wire
