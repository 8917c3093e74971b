`timescale 1ns/1ps
`default_nettype none
// dma: moves rows x cols words between external memory and the scratchpad, from a queue of up to
// QUEUE transfers (issued and not finished). Row r uses ext[ext_base + r*ext_stride + c] and
// sram[sram_base + r*sram_stride + c]; external word addresses are 32 bits.
//
// Words move in beats of up to EW consecutive words of one row (EW = 1 or 2, the external
// interface's width): a beat is one external request (address of its first word, a mask of its
// words) and one scratchpad line access; a row of cols words takes ceil(cols / EW) beats.
//
// External port: requests with valid/ready (a read, or a write with its data), responses to reads
// in request order with rsp_valid (the DMA always takes them). Any latency works; the cycle counts
// below (and the machine model's) assume a memory that is always ready and answers a read L cycles
// after taking it (L = 0: in the same cycle). At most PENDING reads wait for their answers.
//
// Timing with such a memory. A transfer takes its descriptor in cycle s (its one "setup" cycle):
// s = max(issue + 1, when the engine is free, for a STORE: one cycle after every LOAD before it
// has ended, so it stores what they brought). With n = rows * ceil(cols / EW) beats:
//   LOAD   requests beats in cycles s+1 .. s+n; beat b is written to the scratchpad in cycle
//          s+2+L+b; the transfer ends (stops counting as in flight) at s+n+L+2. The engine is free
//          for the next transfer's setup at s+n+1: a LOAD's answers overlap the next requests.
//   STORE  reads beat b from the scratchpad in cycle s+1+b and sends it in s+3+b; it ends at
//          s+n+3, and the engine is free at s+n+2.
// `inflight` counts transfers issued and not ended; `busy` is high while a transfer that has taken
// its descriptor has not ended.
module dma #(
    parameter integer QUEUE   = 4,   // 1..16
    parameter integer PENDING = 32,
    parameter integer AW      = 12,  // scratchpad address bits
    parameter integer EW      = 1,   // words per beat: the external interface's width (1 or 2)
    parameter integer QW      = $clog2(QUEUE + 1)  // bits of a count 0..QUEUE (inflight)
) (
    input  wire        clk,
    input  wire        rst,
    input  wire        start,
    input  wire        is_store,
    input  wire [15:0] rows,
    input  wire [15:0] cols,
    input  wire [31:0] ext_base,
    input  wire [15:0] ext_stride,
    input  wire [AW-1:0] sram_base,
    input  wire [AW-1:0] sram_stride,
    output reg  [QW-1:0] inflight,
    output wire        busy,
    output wire        ext_req_valid,
    input  wire        ext_req_ready,
    output wire        ext_req_we,
    output wire [EW-1:0] ext_req_mask,   // the beat's words (word j at ext_req_addr + j)
    output wire [31:0] ext_req_addr,
    output wire [32*EW-1:0] ext_req_wdata,
    input  wire        ext_rsp_valid,
    input  wire [32*EW-1:0] ext_rsp_rdata,
    output wire [EW-1:0] sram_re,        // a line of the beat's words from sram_raddr
    output wire [AW-1:0] sram_raddr,
    input  wire [32*EW-1:0] sram_rdata,
    output reg  [EW-1:0] sram_we,        // a line of the beat's words to sram_waddr
    output reg  [AW-1:0] sram_waddr,
    output reg  [32*EW-1:0] sram_wdata
);
    localparam integer DW  = 1 + 16 + 16 + 32 + 16 + AW + AW;  // a descriptor
    localparam integer PW  = $clog2(PENDING);
    localparam integer QPW = (QUEUE > 1) ? $clog2(QUEUE) : 1;  // a queue pointer (wraps at QUEUE - 1)
    localparam integer QUEUE_M1 = QUEUE - 1;
    localparam integer ONE      = 1;
    localparam [QPW-1:0] Q_LAST = QUEUE_M1[QPW-1:0];
    localparam [QW-1:0]  Q_ONE  = ONE[QW-1:0];

    // ------------------------------------------------------------------ descriptors waiting
    reg [DW-1:0] dq [0:QUEUE-1];
    reg [QPW-1:0] dq_rp, dq_wp;
    reg [QW-1:0]  dq_count;
    // (a descriptor is {is_store, rows, cols, ext_base, ext_stride, sram_base, sram_stride}; the fields
    // are picked where a transfer takes them, so a simulator works out these wide values only then)

    // ------------------------------------------------------------------ the request engine
    localparam [1:0] R_IDLE = 2'd0, R_SETUP = 2'd1, R_REQ = 2'd2;
    reg [1:0]  state;
    reg        store;
    reg [15:0] rows_m1, cols_m1, r, c, e_stride;
    reg [31:0] e_row;
    reg [AW-1:0] s_row, s_stride;
    reg [QW-1:0] active;               // transfers that took their descriptor and have not ended
    reg [QW-1:0] loads_out;            // of those, LOADs
    wire [31:0] e_addr  = e_row + {16'd0, c};
    wire [AW-1:0] s_addr = s_row + c[AW-1:0];
    // the beat: its words c .. c+EW-1 that lie in the row, and whether it ends the row. A beat that
    // reaches the row's end wraps c to 0, so c never passes cols_m1: equalities decide both.
    wire [EW-1:0] bmask;
    wire        row_end;
    wire        at_last = (c == cols_m1);
    generate
        if (EW == 1) begin : g_beat1
            assign bmask   = 1'b1;
            assign row_end = at_last;
        end else begin : g_beat2  // the second word is in the row unless the first is its last
            assign bmask   = {!at_last, 1'b1};
            assign row_end = at_last || (c + 16'd1 == cols_m1);
        end
    endgenerate
    wire        last_wd = (r == rows_m1) && row_end;

    // LOAD answers still to come: the scratchpad line each goes to ({last, mask, address}), and
    // whether it ends a transfer
    localparam integer PQW = 1 + EW + AW;
    reg [PQW-1:0] pq [0:PENDING-1];
    reg [PW-1:0] pq_rp, pq_wp;
    reg [PW:0]  pq_count;

    // STORE beats on their way: read from the scratchpad, then sent (a small skid buffer keeps
    // them when the memory is not ready)
    localparam integer SKID = 4;
    localparam integer SW   = 1 + EW + 32 + 32 * EW;  // {last, mask, ext address, data}
    reg        st1_v, st2_v, st1_last, st2_last;
    reg [31:0] st1_addr, st2_addr;
    reg [EW-1:0] st1_mask, st2_mask;
    reg [SW-1:0] sk [0:SKID-1];
    reg [1:0]  sk_rp, sk_wp;
    reg [2:0]  sk_count;
    wire        arr_v    = st2_v;      // a stored beat's data is here this cycle
    wire [SW-1:0] arr    = {st2_last, st2_mask, st2_addr, sram_rdata};
    wire        st_v     = (sk_count != 3'd0) || arr_v;
    wire [SW-1:0] st_out = (sk_count != 3'd0) ? sk[sk_rp] : arr;
    wire        st_fire  = st_v && ext_req_ready;
    wire [3:0]  st_held  = {1'b0, sk_count} + {3'd0, st1_v} + {3'd0, st2_v};
    wire        st_room  = st_held < SKID[3:0];

    // this cycle's request: stored words first, then the current LOAD's next word
    wire ld_v    = (state == R_REQ) && !store && !st_v && (pq_count < PENDING[PW:0]);
    wire ld_fire = ld_v && ext_req_ready;
    wire st_rd   = (state == R_REQ) && store && st_room;  // read the next word to store
    assign ext_req_valid = st_v || ld_v;
    assign ext_req_we    = st_v;
    assign ext_req_mask  = st_v ? st_out[SW-2 -: EW] : bmask;
    assign ext_req_addr  = st_v ? st_out[32*EW +: 32] : e_addr;
    assign ext_req_wdata = st_out[32*EW-1:0];
    assign sram_re       = st_rd ? bmask : {EW{1'b0}};
    assign sram_raddr    = s_addr;

    wire advance  = ld_fire || st_rd;  // the current transfer's word went out
    wire req_done = advance && last_wd;
    // the engine can take a descriptor this cycle
    wire free     = (state == R_IDLE) || (req_done && !store);
    wire have_q   = (dq_count != {QW{1'b0}});
    wire take_st  = have_q ? dq[dq_rp][DW-1] : is_store;
    wire take     = free && (have_q || start) && (!take_st || loads_out == {QW{1'b0}});
    wire bypass   = take && !have_q;   // the descriptor issued this cycle starts at once

    // completions: a LOAD's last answer written, a STORE's last word sent
    reg  rsp_v, rsp_last;
    wire ld_end   = rsp_v && rsp_last;
    wire st_end   = st_fire && st_out[SW-1];
    wire ends     = ld_end || st_end;
    assign busy   = (active != {QW{1'b0}});

    always @(posedge clk) begin
        if (rst) begin
            dq_rp <= {QPW{1'b0}};
            dq_wp <= {QPW{1'b0}};
            dq_count <= {QW{1'b0}};
            state <= R_IDLE;
            store <= 1'b0;
            rows_m1 <= 16'd0;
            cols_m1 <= 16'd0;
            r <= 16'd0;
            c <= 16'd0;
            e_row <= 32'd0;
            e_stride <= 16'd0;
            s_row <= {AW{1'b0}};
            s_stride <= {AW{1'b0}};
            active <= {QW{1'b0}};
            loads_out <= {QW{1'b0}};
            inflight <= {QW{1'b0}};
        end else if (start || take || ends || state != R_IDLE) begin  // idle otherwise
            // the queue of descriptors
            if (start && !bypass) begin
                dq[dq_wp] <= {is_store, rows, cols, ext_base, ext_stride, sram_base, sram_stride};
                dq_wp <= (dq_wp == Q_LAST) ? {QPW{1'b0}} : dq_wp + 1'b1;
            end
            if (take && have_q) dq_rp <= (dq_rp == Q_LAST) ? {QPW{1'b0}} : dq_rp + 1'b1;
            if (start || take || ends) begin  // the counts change only then (a streaming cycle skips them)
                dq_count <= dq_count + ((start && !bypass) ? Q_ONE : {QW{1'b0}}) - ((take && have_q) ? Q_ONE : {QW{1'b0}});
                inflight <= inflight + (start ? Q_ONE : {QW{1'b0}}) - (ends ? Q_ONE : {QW{1'b0}});
                active <= active + (take ? Q_ONE : {QW{1'b0}}) - (ends ? Q_ONE : {QW{1'b0}});
                loads_out <= loads_out + ((take && !take_st) ? Q_ONE : {QW{1'b0}}) - (ld_end ? Q_ONE : {QW{1'b0}});
            end

            // the request engine
            if (advance) begin
                if (row_end) begin
                    c <= 16'd0;
                    r <= r + 16'd1;
                    e_row <= e_row + {16'd0, e_stride};
                    s_row <= s_row + s_stride;
                end else begin
                    c <= c + EW[15:0];
                end
            end
            case (state)
                R_SETUP: state <= R_REQ;
                R_REQ: if (req_done) state <= R_IDLE;
                default: state <= R_IDLE;
            endcase
            if (take) begin
                state <= R_SETUP;
                store <= take_st;
                rows_m1 <= (have_q ? dq[dq_rp][DW-2 -: 16] : rows) - 16'd1;
                cols_m1 <= (have_q ? dq[dq_rp][DW-18 -: 16] : cols) - 16'd1;
                e_row <= have_q ? dq[dq_rp][DW-34 -: 32] : ext_base;
                e_stride <= have_q ? dq[dq_rp][DW-66 -: 16] : ext_stride;
                s_row <= have_q ? dq[dq_rp][2*AW-1:AW] : sram_base;
                s_stride <= have_q ? dq[dq_rp][AW-1:0] : sram_stride;
                r <= 16'd0;
                c <= 16'd0;
            end
        end
    end

    // ------------------------------------------------------------------- LOAD answers
    // A memory with no latency answers in the request's own cycle, before the request's entry is
    // in the queue: then the entry is taken straight from the request.
    wire [PQW-1:0] pq_head = (pq_count == {(PW+1){1'b0}}) ? {last_wd, bmask, s_addr} : pq[pq_rp];
    always @(posedge clk) begin
        if (rst) begin
            pq_rp <= {PW{1'b0}};
            pq_wp <= {PW{1'b0}};
            pq_count <= {(PW+1){1'b0}};
            rsp_v <= 1'b0;
            rsp_last <= 1'b0;
            sram_we <= {EW{1'b0}};
        end else if (ld_fire || ext_rsp_valid || rsp_v) begin  // idle otherwise
            if (ld_fire) begin
                pq[pq_wp] <= {last_wd, bmask, s_addr};
                pq_wp <= pq_wp + 1'b1;
            end
            if (ext_rsp_valid) pq_rp <= pq_rp + 1'b1;
            pq_count <= pq_count + {{PW{1'b0}}, ld_fire} - {{PW{1'b0}}, ext_rsp_valid};
            // an answer is written the cycle after it comes
            rsp_v <= ext_rsp_valid;
            rsp_last <= ext_rsp_valid && pq_head[PQW-1];
            sram_we <= ext_rsp_valid ? pq_head[AW +: EW] : {EW{1'b0}};
        end
        if (ext_rsp_valid) begin
            sram_waddr <= pq_head[AW-1:0];
            sram_wdata <= ext_rsp_rdata;
        end
    end

    // ------------------------------------------------------------------- STORE words
    always @(posedge clk) begin
        if (rst) begin
            st1_v <= 1'b0;
            st2_v <= 1'b0;
            st1_last <= 1'b0;
            st2_last <= 1'b0;
            st1_addr <= 32'd0;
            st2_addr <= 32'd0;
            st1_mask <= {EW{1'b0}};
            st2_mask <= {EW{1'b0}};
            sk_rp <= 2'd0;
            sk_wp <= 2'd0;
            sk_count <= 3'd0;
        end else if (st_rd || st1_v || st2_v || sk_count != 3'd0) begin  // idle otherwise
            st1_v <= st_rd;
            st1_last <= st_rd && last_wd;
            if (st_rd) begin
                st1_addr <= e_addr;
                st1_mask <= bmask;
            end
            st2_v <= st1_v;
            st2_last <= st1_last;
            st2_addr <= st1_addr;
            st2_mask <= st1_mask;
            // the arriving word waits in the skid buffer unless it went out at once
            if (arr_v && !(sk_count == 3'd0 && st_fire)) begin
                sk[sk_wp] <= arr;
                sk_wp <= sk_wp + 2'd1;
            end
            if (sk_count != 3'd0 && st_fire) sk_rp <= sk_rp + 2'd1;
            sk_count <= sk_count + {2'd0, arr_v && !(sk_count == 3'd0 && st_fire)}
                                 - {2'd0, sk_count != 3'd0 && st_fire};
        end
    end
endmodule
`default_nettype wire
