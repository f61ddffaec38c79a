DROP TABLE `fx_symbol_override`;
