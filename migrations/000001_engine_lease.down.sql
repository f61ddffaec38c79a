DROP TABLE IF EXISTS `engine_lease`;
