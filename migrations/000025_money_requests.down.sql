DROP TABLE `fx_money_request`;
