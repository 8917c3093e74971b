// GA2's configurable sizes (model/capra/config.py): tools/hw.py passes a define for each value that
// differs from the default configuration; without one, the default chip. Included before a module
// header where a port's width depends on them (rtl/ga2.v, the testbenches) and by rtl/ga2_defs.vh.
`ifndef GA2_SRAM_WORDS_D
`define GA2_SRAM_WORDS_D 4096
`endif
`ifndef GA2_DMA_QUEUE_D
`define GA2_DMA_QUEUE_D 4
`endif
`ifndef GA2_EXT_WORDS_D
`define GA2_EXT_WORDS_D 1
`endif
`ifndef GA2_N_D
`define GA2_N_D 4
`endif
