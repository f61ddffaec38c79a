-- The FIX venue (FXDESK_VENUE=fix). Two tables are the session's message store, in the column
-- names of QuickFIX/Go's SQL store (the desk's own store writes them: internal/venue/fix/store.go):
-- the session's sequence numbers and the messages the desk sent, so a restarted desk or a new
-- lease holder resumes the session where the last one left it and can answer the venue's resend
-- requests. The other three are the
-- desk's journal of the session's orders and of the executions the venue reported, from which
-- the FIX adapter builds the venue state the reconciler reads (internal/venue/fix).
CREATE TABLE `fx_fix_sessions` (
  `beginstring` CHAR(8) NOT NULL,
  `sendercompid` VARCHAR(64) NOT NULL,
  `sendersubid` VARCHAR(64) NOT NULL,
  `senderlocid` VARCHAR(64) NOT NULL,
  `targetcompid` VARCHAR(64) NOT NULL,
  `targetsubid` VARCHAR(64) NOT NULL,
  `targetlocid` VARCHAR(64) NOT NULL,
  `session_qualifier` VARCHAR(64) NOT NULL,
  `creation_time` DATETIME NOT NULL,
  `incoming_seqnum` INT NOT NULL,
  `outgoing_seqnum` INT NOT NULL,
  PRIMARY KEY (`beginstring`, `sendercompid`, `sendersubid`, `senderlocid`, `targetcompid`, `targetsubid`, `targetlocid`, `session_qualifier`)
) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin;

CREATE TABLE `fx_fix_messages` (
  `beginstring` CHAR(8) NOT NULL,
  `sendercompid` VARCHAR(64) NOT NULL,
  `sendersubid` VARCHAR(64) NOT NULL,
  `senderlocid` VARCHAR(64) NOT NULL,
  `targetcompid` VARCHAR(64) NOT NULL,
  `targetsubid` VARCHAR(64) NOT NULL,
  `targetlocid` VARCHAR(64) NOT NULL,
  `session_qualifier` VARCHAR(64) NOT NULL,
  `msgseqnum` INT NOT NULL,
  `message` MEDIUMTEXT NOT NULL,
  PRIMARY KEY (`beginstring`, `sendercompid`, `sendersubid`, `senderlocid`, `targetcompid`, `targetsubid`, `targetlocid`, `session_qualifier`, `msgseqnum`)
) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin;

-- One row per order the desk sent on the session, written before it is sent (identity before
-- action). `tradeId` is the opening order's ClOrdID: the order's own for an open, the position it
-- reduces for a close. `status` is SENDING until the venue's report says NEW, FILLED or REJECTED.
CREATE TABLE `fx_fix_order` (
  `clOrdId` VARCHAR(64) NOT NULL,
  `tradeId` VARCHAR(64) NOT NULL,
  `symbol` VARCHAR(16) NOT NULL,
  `side` CHAR(1) NOT NULL,
  `qty` DECIMAL(24,8) NOT NULL,
  `status` VARCHAR(16) NOT NULL,
  `cumQty` DECIMAL(24,8) NOT NULL DEFAULT 0,
  `avgPx` DECIMAL(24,10) NOT NULL DEFAULT 0,
  `venueOrderId` VARCHAR(64) NULL,
  `rejectReason` INT NULL,
  `text` VARCHAR(255) NULL,
  `sentAt` DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  `updatedAt` DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (`clOrdId`),
  KEY `idx_fx_fix_order_trade` (`tradeId`)
) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin;

-- One row per execution the venue reported (ExecID unique: a resent or repeated report is
-- applied once). `id` is the venue "transaction id" the reconciler's cursor counts.
CREATE TABLE `fx_fix_execution` (
  `id` BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  `execId` VARCHAR(64) NOT NULL,
  `clOrdId` VARCHAR(64) NOT NULL,
  `venueOrderId` VARCHAR(64) NOT NULL,
  `symbol` VARCHAR(16) NOT NULL,
  `units` DECIMAL(24,8) NOT NULL,
  `price` DECIMAL(24,10) NOT NULL,
  `transactTime` DATETIME(3) NOT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uq_fx_fix_execution_exec` (`execId`),
  KEY `idx_fx_fix_execution_order` (`clOrdId`, `id`)
) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin;

-- Which desk trade each execution opened, reduced or closed, and by how many signed units: the
-- desk's hedging positions over the venue's one net position per symbol (docs/fix.md).
CREATE TABLE `fx_fix_allocation` (
  `executionId` BIGINT UNSIGNED NOT NULL,
  `tradeId` VARCHAR(64) NOT NULL,
  `units` DECIMAL(24,8) NOT NULL,
  PRIMARY KEY (`executionId`, `tradeId`),
  KEY `idx_fx_fix_allocation_trade` (`tradeId`)
) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin;
