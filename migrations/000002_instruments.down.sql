-- Instruments reference calendars, so they go first.
DROP TABLE IF EXISTS `fx_instrument`;
DROP TABLE IF EXISTS `fx_session_calendar`;
