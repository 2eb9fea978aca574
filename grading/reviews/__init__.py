"""The record: the one writer of a review and its stored state (store) with the grading write path's plain SQL
(sql), the counters booked with every write (rollups), criteria versions and their worked examples, an item's
human verdict, the reads of items and of what counts, org memory, grading tickets, the spend ledger, service
targets, blind review, and the audit trail's reads."""
