// ga2_tb_main.cpp: the main of a Verilator build of tb/ga2_tb.v (model/replay/simulators.py).
//
// It drives the testbench's clock, which Icarus toggles in Verilog (`always #5 clk = ~clk`): a
// half period at a time, the clock turned and the model evaluated, until $finish. Verilator's own
// --main would run that toggle as a coroutine of its --timing scheduler, resumed twice a cycle,
// a tenth of a replay's time in the bench (docs/cycle_model.md). The testbench's initial block still
// waits with delays (always whole periods, at falling edges): the evaluation at that time resumes it.
#include "verilated.h"

#include "Vga2_tb.h"

#include <memory>

int main(int argc, char** argv) {
    const std::unique_ptr<VerilatedContext> contextp{new VerilatedContext};
    contextp->commandArgs(argc, argv);
    const std::unique_ptr<Vga2_tb> topp{new Vga2_tb{contextp.get()}};
    // the testbench's `timescale 1ns/1ps: time counts picoseconds, and a period is 10 ns
    const uint64_t half_period = 5000;
    topp->clk = 0;
    while (!contextp->gotFinish()) {
        topp->eval();
        contextp->timeInc(half_period);
        topp->clk = !topp->clk;
    }
    topp->final();
    return 0;
}
