DROP TABLE `fx_event`;
